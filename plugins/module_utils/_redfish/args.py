# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The connection options every Redfish module shares (paired with ``doc_fragments/redfish.py``).

Why: one spec means one validation of ``bmc_url`` and the credentials, the same env fallbacks
everywhere, and a documentation fragment that cannot drift from the code (sanity tests compare them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ansible.module_utils.basic import env_fallback

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

# Default ``api_timeout``: seconds one HTTP request to the BMC may take (dellemc.openmanage uses 30, sushy 60).
DEFAULT_API_TIMEOUT = 30
# Default seconds to wait for a BMC to answer again after its reset (``bmc_reset``'s ``wait_timeout``,
# ``redfish_virtual_media``'s ``bmc_ready_timeout``): an iDRAC8 takes about 3.5 minutes.
BMC_READY_TIMEOUT = 600
# How the modules authenticate (doc fragment ``auth``). ``basic``: every request carries the
# credentials and no session exists on the BMC, so none can pile up or leak (iDRAC8 allows only a
# handful and then answers a misleading 401). ``session``: one Redfish session per task, always
# deleted at the end (two more requests), with a fallback to Basic when the BMC refuses a session.
AUTH_MODES = ("basic", "session")
DEFAULT_AUTH = "basic"
# Most ``refused_login_retries``: each try of a wrong password counts toward the BMC's blocking of the address after
# failed logins (iDRAC's IPBlocking, when enabled, counts failures within a window of about a minute), so a few
# tries spread over the window (``REFUSED_LOGIN_DELAY`` apart), never an open-ended loop.
MAX_REFUSED_LOGIN_RETRIES = 3


def redfish_argument_spec() -> dict[str, Any]:
    """Options common to every Redfish module (documented in the ``redfish`` doc fragment); a fresh dict.

    Named as in the rest of the collection: ``api_timeout`` (seconds per HTTP request, as in the
    Vultr modules) and ``ca_cert`` (as in the Kubernetes modules), not community.general's
    ``timeout``/``ca_path``.
    """
    return {
        "bmc_url": {"type": "str", "required": True},
        "username": {"type": "str", "required": True, "fallback": (env_fallback, ["REDFISH_USERNAME"])},
        "password": {
            "type": "str",
            "required": True,
            "no_log": True,
            "fallback": (env_fallback, ["REDFISH_PASSWORD"]),
        },
        "validate_certs": {"type": "bool", "default": True},
        "ca_cert": {"type": "path"},
        "api_timeout": {"type": "int", "default": DEFAULT_API_TIMEOUT},
        "auth": {"type": "str", "default": DEFAULT_AUTH, "choices": list(AUTH_MODES)},
        "system_id": {"type": "str"},
        "manager_id": {"type": "str"},
        "refused_login_retries": {"type": "int", "default": 0},
    }


@dataclass(frozen=True)
class ConnectionParams:
    """Validated connection settings for one BMC."""

    base_url: str  # scheme://host[:port], what sushy's connector joins paths onto
    root_prefix: str  # path prefix + /redfish/v1/ (a lab may serve many BMCs under path prefixes)
    username: str
    password: str
    verify: bool | str  # False, True or a CA bundle path (sushy's ``verify``)
    timeout: int  # seconds per HTTP request (option ``api_timeout``)
    auth: str = DEFAULT_AUTH  # one of AUTH_MODES
    system_id: str | None = None
    manager_id: str | None = None
    # Times a login refused with 401 is tried again (option ``refused_login_retries``): a BMC that restarts refuses
    # valid credentials for a moment, which only a caller that proved the credentials may wait out.
    refused_login_retries: int = 0

    @property
    def bmc_url(self) -> str:
        return self.base_url + self.root_prefix[: -len("/redfish/v1/")]


def parse_bmc_url(value: str) -> tuple[str, str]:
    """Split ``bmc_url`` into (base_url, root_prefix); raise InputError with the fix when invalid."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("https", "http"):
        raise InputError(
            "bmc_url",
            f"{value!r} must start with https:// (or http:// for a lab emulator), e.g. https://idrac.example:443",
        )
    if not parts.hostname:
        raise InputError("bmc_url", f"{value!r} has no host name; use https://host[:port]")
    if parts.query or parts.fragment:
        raise InputError("bmc_url", f"{value!r} must not carry a query or fragment; use https://host[:port]")
    try:
        port = parts.port  # urllib only validates the port when it is read
    except ValueError as exc:
        raise InputError("bmc_url", f"{value!r} has an invalid port ({exc})") from exc
    if port == 0:
        raise InputError("bmc_url", f"{value!r} has port 0; use https://host[:port] with a real port")
    path = parts.path.rstrip("/")
    if path.endswith("/redfish/v1"):
        path = path[: -len("/redfish/v1")]
    return f"{parts.scheme}://{parts.netloc}", f"{path}/redfish/v1/"


def refused_login_retries(value: Any) -> int:
    """Option ``refused_login_retries`` checked (0 to ``MAX_REFUSED_LOGIN_RETRIES``; unset is 0)."""
    retries = int(value or 0)
    if not 0 <= retries <= MAX_REFUSED_LOGIN_RETRIES:
        raise InputError(
            "refused_login_retries",
            f"must be 0 to {MAX_REFUSED_LOGIN_RETRIES}, got {retries}: each retry of a wrong password counts toward "
            "the BMC's blocking of this address after failed logins",
        )
    return retries


def connection_params(params: dict[str, Any]) -> ConnectionParams:
    """Validate the shared options of a module's ``params``."""
    base_url, root_prefix = parse_bmc_url(params["bmc_url"])
    timeout = int(DEFAULT_API_TIMEOUT if params.get("api_timeout") is None else params["api_timeout"])
    if timeout <= 0:
        raise InputError("api_timeout", f"must be a positive number of seconds, got {timeout}")
    for key in ("username", "password"):  # Ansible's "required" lets an empty string through (an unset vault var)
        if not params.get(key):
            raise InputError(key, f"is empty: give the BMC {key} (or set REDFISH_{key.upper()})")
    auth = params.get("auth") or DEFAULT_AUTH
    if auth not in AUTH_MODES:
        raise InputError("auth", f"{auth!r} is not one of {', '.join(AUTH_MODES)}")
    retries = refused_login_retries(params.get("refused_login_retries"))
    verify: bool | str = bool(params.get("validate_certs", True))
    if verify and params.get("ca_cert"):
        verify = str(params["ca_cert"])
    return ConnectionParams(
        base_url=base_url,
        root_prefix=root_prefix,
        username=params["username"],
        password=params["password"],
        verify=verify,
        timeout=timeout,
        auth=auth,
        system_id=params.get("system_id"),
        manager_id=params.get("manager_id"),
        refused_login_retries=retries,
    )
