# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument spec every Vultr module shares (paired with ``plugins/doc_fragments/vultr.py``).

Why: one place for credentials, endpoint, TLS and timeouts, named as in vultr.cloud so users of
that collection feel at home, and one function that turns them into a client.
"""

from __future__ import annotations

import os
from typing import Any

from ansible.module_utils.basic import env_fallback

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

from .client import DEFAULT_ENDPOINT, VultrClient

# Default ``wait_timeout`` of the state-changing modules (``_common.args.wait_argument_spec``), in
# seconds: Terraform's vultr provider gives VKE 60 minutes; GPU pools take the longest.
DEFAULT_WAIT_TIMEOUT = 3600


def vultr_argument_spec() -> dict[str, Any]:
    """Options common to every Vultr module (documented in the ``vultr`` doc fragment)."""
    return {
        "api_key": {"type": "str", "no_log": True, "fallback": (env_fallback, ["VULTR_API_KEY"])},
        "api_endpoint": {
            "type": "str",
            "default": DEFAULT_ENDPOINT,
            "fallback": (env_fallback, ["VULTR_API_ENDPOINT"]),
        },
        "api_timeout": {"type": "int", "default": 60},
        "api_retries": {"type": "int", "default": 5},
        "api_retry_max_delay": {"type": "int", "default": 12},
        "validate_certs": {"type": "bool", "default": True},
        "ca_cert": {"type": "path"},
    }


def client_from_params(params: dict[str, Any]) -> VultrClient:
    """A client for the module's params; raises ``InputError`` before any request on bad input."""
    if not params.get("api_key"):
        raise InputError("api_key", "is required: set the option or the VULTR_API_KEY environment variable")
    for name, minimum in (("api_timeout", 1), ("api_retries", 0), ("api_retry_max_delay", 0)):
        if params[name] < minimum:
            raise InputError(name, f"must be at least {minimum}, got {params[name]}")
    return VultrClient(
        params["api_key"],
        api_endpoint=params.get("api_endpoint"),
        timeout=params["api_timeout"],
        retries=params["api_retries"],
        retry_max_delay=params["api_retry_max_delay"],
        validate_certs=params["validate_certs"],
        ca_cert=ca_cert(params.get("ca_cert")),
    )


def ca_cert(path: str | None) -> str | None:
    """The CA bundle of ``ca_cert``, refused before any request when it is not a readable file."""
    if path and not os.path.isfile(path):
        raise InputError("ca_cert", f"{path} is not a file: give the path of a PEM CA bundle on the controller")
    return path or None
