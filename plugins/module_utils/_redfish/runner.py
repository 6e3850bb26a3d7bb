# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The body of each Redfish module: validate, open one client, detect, act, report.

Why: every module does the same dance (require sushy, validate the shared options before any
request, open one session that is always closed, detect the generation, pick the quirks) and
then one specific action. The modules stay a docstring plus ``MetalplaneModule(...).run(fn)``.
Every result carries ``requests`` (how many HTTP exchanges the task made) for timelines and the
benchmark, and ``auth_fallback`` (the BMC refused a write to HTTP Basic and the task used a session,
see ``session.py``), with a warning that names the cheaper setting for that BMC.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

from . import boot, info, power
from . import virtual_media as vm
from .args import connection_params
from .detect import detect_quirks
from .quirks import for_name
from .session import SUSHY_IMPORT_ERROR, RedfishClient


def _with_client(module: Any, action: Callable[[RedfishClient, Any], dict[str, Any]]) -> dict[str, Any]:
    module.require("sushy", SUSHY_IMPORT_ERROR)
    params = connection_params(module.params)
    client = RedfishClient(params)
    try:
        with client:
            result = action(client, module)
    finally:
        result_requests = client.log.count
    result["requests"] = result_requests
    result["auth_fallback"] = client.auth_fallback
    if client.auth_fallback:
        module.warn(
            f"The BMC at {params.bmc_url} refused a write with HTTP {client.fallback_status} under HTTP Basic auth"
            " although reads worked; the task opened a Redfish session, retried it and deleted the session at the"
            " end. Set auth: session for this BMC to save the refused request."
        )
    if "diff" in result and not module.diff_mode:
        result.pop("diff")
    return result


def run_info(module: Any) -> dict[str, Any]:
    return _with_client(module, lambda client, _m: {"changed": False, "redfish": info.gather(client)})


def run_power(module: Any) -> dict[str, Any]:
    p = module.params

    def act(client: RedfishClient, m: Any) -> dict[str, Any]:
        result = power.ensure_power(
            client,
            p["state"],
            check_mode=m.check_mode,
            timeout=p["wait_timeout"],
            force_off_after_timeout=p["force_off_after_timeout"],
            graceful_timeout=p["graceful_timeout"],
        )
        if result["changed"]:
            result["diff"] = {
                "before": {"power_state": result["power_state_before"]},
                "after": {"power_state": "Off" if p["state"] in ("off", "forced_off") else "On"},
            }
        return result

    return _with_client(module, act)


def run_boot(module: Any) -> dict[str, Any]:
    p = module.params
    if p.get("device") is None and p.get("mode") is None and not p.get("order") and not p.get("first"):
        raise InputError("device", "give at least one of device, mode, order or first")
    if p.get("first") is not None and p["first"] not in boot.FIRST_KINDS:
        raise InputError("first", f"{p['first']!r} is not one of {', '.join(boot.FIRST_KINDS)}")
    if p.get("device") is not None and p["device"] not in boot.DEVICES:
        raise InputError("device", f"{p['device']!r} is not one of {', '.join(boot.DEVICES)}")

    def act(client: RedfishClient, m: Any) -> dict[str, Any]:
        quirks = for_name(detect_quirks(client))
        return boot.apply(client, quirks, p, check_mode=m.check_mode)

    return _with_client(module, act)


def run_virtual_media(module: Any) -> dict[str, Any]:
    p = module.params
    if p["state"] == "inserted":
        vm.validate_image_url(p.get("image_url"))

    def act(client: RedfishClient, m: Any) -> dict[str, Any]:
        quirks = for_name(detect_quirks(client))
        result = vm.ensure(client, quirks, p, check_mode=m.check_mode)
        result["logins"] = client.logins
        return result

    return _with_client(module, act)


def run_bmc_reset(module: Any) -> dict[str, Any]:
    p = module.params

    def act(client: RedfishClient, m: Any) -> dict[str, Any]:
        quirks = for_name(detect_quirks(client))
        result: dict[str, Any] = {"changed": True, "quirks": quirks.name}
        if m.check_mode:
            result["reset"] = "planned"
            return result
        result["reset"] = quirks.reset_bmc(client)
        if p["wait"]:
            result["polls"] = client.wait_ready(p["wait_timeout"])
            result["ready"] = True
        return result

    return _with_client(module, act)
