# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options shared by every Kubernetes module (paired with ``doc_fragments/kube.py``).

Why: users already drive kubernetes.core with ``kubeconfig``/``context`` and the ``K8S_AUTH_*``
environment (AWX credentials set exactly those variables). The same names and the same fallbacks
here mean one credential works for both collections. ``validate_certs`` has no default: unset, the
kubeconfig decides (which verifies TLS unless it says ``insecure-skip-tls-verify``).
"""

from __future__ import annotations

from typing import Any

# Option name -> kubernetes-client Configuration attribute (kubernetes.core's AUTH_ARG_MAP subset).
AUTH_ARG_MAP: dict[str, str] = {
    "kubeconfig": "kubeconfig",
    "context": "context",
    "host": "host",
    "api_key": "api_key",
    "validate_certs": "verify_ssl",
    "ca_cert": "ssl_ca_cert",
    "client_cert": "cert_file",
    "client_key": "key_file",
    "proxy": "proxy",
    "no_proxy": "no_proxy",
}

# Environment fallbacks, named as kubernetes.core reads them: K8S_AUTH_<OPTION> or K8S_AUTH_<ATTRIBUTE>.
ENV_PREFIX = "K8S_AUTH_"


def kube_argument_spec() -> dict[str, Any]:
    """Options common to every Kubernetes module (documented in the ``kube`` doc fragment); a fresh dict.

    The aliases (``verify_ssl``, ``ssl_ca_cert``, ``cert_file``, ``key_file``) are kubernetes.core's
    own option names (its ``AUTH_ARG_SPEC``, plugins/module_utils/args_common.py in
    ansible-collections/kubernetes.core), kept so a task or module_defaults written for
    kubernetes.core works here unchanged. They are not leftovers of a rename: keep them.
    """
    return {
        "kubeconfig": {"type": "raw"},
        "context": {"type": "str"},
        "host": {"type": "str"},
        "api_key": {"type": "str", "no_log": True},
        "validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
        "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"]},
        "client_cert": {"type": "path", "aliases": ["cert_file"]},
        "client_key": {"type": "path", "aliases": ["key_file"], "no_log": False},
        "proxy": {"type": "str"},
        "no_proxy": {"type": "str"},
    }


BOOL_FALSE = ("0", "false", "no", "off")


def env_names(option: str) -> tuple[str, ...]:
    """The environment variables consulted for ``option``, in order (kubernetes.core's order)."""
    names = [ENV_PREFIX + option.upper()]
    attribute = AUTH_ARG_MAP[option]
    if attribute != option:
        names.append(ENV_PREFIX + attribute.upper())
    return tuple(names)


def resolve_auth(params: dict[str, Any], environ: dict[str, str]) -> dict[str, Any]:
    """Connection settings from module options, falling back to ``K8S_AUTH_*``; unset ones omitted.

    Keys are the option names (``kubeconfig``, ``validate_certs``, ...). Booleans from the
    environment follow kubernetes.core: anything but 0/false/no is true.
    """
    spec = kube_argument_spec()
    auth: dict[str, Any] = {}
    for option in AUTH_ARG_MAP:
        value = params.get(option)
        if value is None:
            for name in env_names(option):
                if environ.get(name) is not None:
                    value = environ[name]
                    if spec[option].get("type") == "bool":
                        value = value.strip().lower() not in BOOL_FALSE
                    break
        if value is not None and value != "":
            auth[option] = value
    return auth
