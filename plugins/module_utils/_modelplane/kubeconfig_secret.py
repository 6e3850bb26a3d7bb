# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubeconfig Secret an InferenceCluster (``source: Existing``) points at.

Why: Modelplane reads the workload cluster's kubeconfig from a Secret in ``modelplane-system``
(hard-coded; ``secretRef`` has no namespace) and uses it from the provider pods on the control
plane. Two things make a kubeconfig that works on the operator's laptop fail there:

- the server address: the lab's ``127.0.0.1:<port>`` or a private VKE endpoint may not be what the
  control plane can reach, so the current cluster's ``server`` can be overridden (and, when the
  new address does not match the API certificate, ``tls-server-name`` set);
- the credentials: an ``exec`` plugin, an ``auth-provider`` or a file path cannot run or be read
  inside a provider pod, so only embedded static credentials are accepted.

The kubeconfig text is kept byte-for-byte when nothing is overridden, and otherwise re-serialised
deterministically, so applying the Secret twice reports no change. Error messages name fields
only; they never quote the kubeconfig.
"""

from __future__ import annotations

import base64
import traceback
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import validate
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import (
    CLUSTER_LABEL,
    CONTROL_PLANE_NAMESPACE,
    KUBECONFIG_KEY,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
)

try:
    import yaml

    YAML_IMPORT_ERROR: str | None = None
except ImportError:
    yaml = None
    YAML_IMPORT_ERROR = traceback.format_exc()

# User entries a provider pod can use as they are: a bearer token, or a client certificate and key
# embedded as data. (Basic auth is gone from Kubernetes since 1.19.)
_STATIC_TOKEN = "token"
_STATIC_CERT = ("client-certificate-data", "client-key-data")
# User entries that need something outside the kubeconfig: a program, a plugin, or a local file.
_NOT_PORTABLE = ("exec", "auth-provider", "tokenFile", "client-certificate", "client-key")
# Line width for re-serialised kubeconfigs (never fold a value).
_YAML_WIDTH = 1 << 30
# Cluster entries that point at a local file instead of embedding the CA.
_CLUSTER_FILES = ("certificate-authority",)


def parse_kubeconfig(text: str, field: str = "kubeconfig") -> dict[str, Any]:
    """The kubeconfig as a mapping; InputError (without its content) if it is not one."""
    validate.string(field, text)
    if yaml is None:  # pragma: no cover - PyYAML ships with ansible-core
        raise InputError(field, "PyYAML is required to read a kubeconfig")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise InputError(field, "is not valid YAML") from None
    if not isinstance(data, Mapping) or data.get("kind", "Config") != "Config":
        raise InputError(field, "is not a kubeconfig (expected a mapping of kind Config)")
    return dict(data)


def _named(field: str, items: Any, name: str, what: str) -> dict[str, Any]:
    for item in items or []:
        if isinstance(item, Mapping) and item.get("name") == name:
            body = item.get(what)
            if isinstance(body, Mapping):
                return dict(body)
            raise InputError(field, f"{what} {name!r} has no {what} entry")
    raise InputError(field, f"{what} {name!r} is not defined")


def current_context(config: Mapping[str, Any], field: str = "kubeconfig") -> tuple[str, dict[str, Any]]:
    """(name, context) of ``current-context``, or of the only context when none is set."""
    contexts = [c for c in config.get("contexts") or [] if isinstance(c, Mapping)]
    name = config.get("current-context")
    if not name:
        if len(contexts) != 1:
            raise InputError(field, f"has no current-context and {len(contexts)} contexts; set current-context")
        name = contexts[0].get("name")
    context = _named(field, contexts, str(name), "context")
    if not context.get("cluster") or not context.get("user"):
        raise InputError(field, f"context {name!r} must name a cluster and a user")
    return str(name), context


def check_portable(config: Mapping[str, Any], field: str = "kubeconfig") -> None:
    """Refuse credentials a provider pod on the control plane could not use."""
    context = current_context(config, field)[1]
    user = _named(field, config.get("users"), str(context["user"]), "user")
    cluster = _named(field, config.get("clusters"), str(context["cluster"]), "cluster")
    foreign = [key for key in _NOT_PORTABLE if user.get(key)]
    if foreign:
        raise InputError(
            field,
            f"user {context['user']!r} uses {', '.join(foreign)}, which the Modelplane control plane cannot "
            "use; give a kubeconfig with an embedded token or client-certificate-data/client-key-data",
        )
    if not user.get(_STATIC_TOKEN) and not all(user.get(key) for key in _STATIC_CERT):
        raise InputError(
            field,
            f"user {context['user']!r} has no embedded credentials (token or client-certificate-data and "
            "client-key-data)",
        )
    files = [key for key in _CLUSTER_FILES if cluster.get(key)]
    if files:
        raise InputError(
            field, f"cluster {context['cluster']!r} reads {files[0]} from a local file; embed it as {files[0]}-data"
        )
    server_url(f"{field}.server", cluster.get("server"))


def server_url(field: str, value: Any) -> str:
    text = validate.string(field, value)
    parts = urlsplit(text)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InputError(field, f"{text!r} is not an http(s) URL with a host (e.g. https://10.0.0.5:6443)")
    return text


def rewrite_kubeconfig(
    text: str,
    *,
    server: str | None = None,
    tls_server_name: str | None = None,
    field: str = "kubeconfig",
) -> str:
    """The kubeconfig with the current cluster's ``server`` (and ``tls-server-name``) replaced.

    Without overrides the text is returned unchanged, after the same checks.
    """
    config = parse_kubeconfig(text, field)
    check_portable(config, field)
    if server is None and tls_server_name is None:
        return text
    context = current_context(config, field)[1]
    cluster_name = str(context["cluster"])
    clusters = []
    for item in config.get("clusters") or []:
        if isinstance(item, Mapping) and item.get("name") == cluster_name:
            body = dict(item.get("cluster") or {})
            if server is not None:
                body["server"] = server_url("server", server)
            if tls_server_name is not None:
                body["tls-server-name"] = validate.dns_subdomain("tls_server_name", tls_server_name)
            clusters.append({**item, "cluster": body})
        else:
            clusters.append(item)
    config["clusters"] = clusters
    # A huge width: long base64 fields stay on one line, as kubectl writes them.
    return yaml.safe_dump(config, default_flow_style=False, sort_keys=False, width=_YAML_WIDTH)


def kubeconfig_secret(
    name: str,
    kubeconfig: str,
    *,
    cluster: str | None = None,
    server: str | None = None,
    tls_server_name: str | None = None,
    key: str = KUBECONFIG_KEY,
) -> dict[str, Any]:
    """The ``v1/Secret`` in ``modelplane-system`` holding the (rewritten) kubeconfig under ``key``.

    ``data`` (base64), not ``stringData``: the API server never returns ``stringData``, so a
    ``stringData`` manifest would look changed on every run.
    """
    validate.dns_subdomain("secret_name", name)
    key = validate.data_key("secret_key", key)
    text = rewrite_kubeconfig(kubeconfig, server=server, tls_server_name=tls_server_name)
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    if cluster is not None:
        labels[CLUSTER_LABEL] = validate.dns_label("cluster", cluster)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": CONTROL_PLANE_NAMESPACE, "labels": labels},
        "type": "Opaque",
        "data": {key: base64.b64encode(text.encode("utf-8")).decode("ascii")},
    }
