# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Power planning (pure) and execution with waits.

Why: ``reset_system`` returns at once and BMCs differ in which ResetTypes they allow (iDRAC8 may
lack ForceRestart or GracefulShutdown). The planner picks reset values from the advertised
AllowableValues, so the module never sends a value the BMC rejects, and says up front what it will
do (check mode). Execution waits until the state is reached, with one deadline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import WaitTimeout
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for

from .errors import UnsupportedError

try:
    import sushy
except ImportError:  # pragma: no cover - guarded by session.SUSHY_IMPORT_ERROR
    sushy = None

STATES = ("on", "off", "forced_off", "restarted", "cycled")
ALL_RESETS = (
    "On",
    "ForceOn",
    "ForceOff",
    "GracefulShutdown",
    "GracefulRestart",
    "ForceRestart",
    "PowerCycle",
    "PushPowerButton",
)
POWER_BACKOFF = Backoff(initial=1.0, cap=10.0, factor=1.5, jitter=0.1)
GRACEFUL_OFF_TIMEOUT = 90  # seconds before falling back to ForceOff (ironic's known issue: ~90 s)


def normalise_power(value: str | None) -> str:
    """'On'/'PoweringOn' -> 'On', 'Off'/'PoweringOff' -> 'Off', else the value."""
    if value in ("On", "PoweringOn"):
        return "On"
    if value in ("Off", "PoweringOff"):
        return "Off"
    return value or "Unknown"


@dataclass
class PowerPlan:
    """Resets to send in order, the power state to reach, and the graceful-off fallback."""

    resets: list[str] = field(default_factory=list)
    target: str = "On"
    force_after_graceful: bool = False  # off: ForceOff when GracefulShutdown did not finish in time

    @property
    def changed(self) -> bool:
        return bool(self.resets)


def _first(allowed: set[str], *choices: str) -> str | None:
    return next((choice for choice in choices if choice in allowed), None)


def plan_power(  # noqa: PLR0911
    state: str, current: str | None, allowed: list[str] | set[str] | None, force_off_after_timeout: bool = True
) -> PowerPlan:
    """Pure planner: desired ``state`` + observed power + allowed ResetTypes -> PowerPlan."""
    allowed_set = set(allowed or ALL_RESETS)
    power = normalise_power(current)

    def need(*choices: str) -> str:
        choice = _first(allowed_set, *choices)
        if choice is None:
            raise UnsupportedError(
                f"state {state!r}: the BMC allows ResetType {sorted(allowed_set)}, none of {list(choices)}"
            )
        return choice

    if state == "on":
        return PowerPlan([] if power == "On" else [need("On", "ForceOn", "PushPowerButton")], "On")
    if state == "forced_off":
        return PowerPlan([] if power == "Off" else [need("ForceOff")], "Off")
    if state == "off":
        if power == "Off":
            return PowerPlan([], "Off")
        if "GracefulShutdown" in allowed_set:
            force = force_off_after_timeout and "ForceOff" in allowed_set
            return PowerPlan(["GracefulShutdown"], "Off", force_after_graceful=force)
        if force_off_after_timeout:
            return PowerPlan([need("ForceOff")], "Off")
        raise UnsupportedError(
            "state 'off': the BMC does not allow GracefulShutdown; set force_off_after_timeout=true to use ForceOff"
        )
    if state in ("restarted", "cycled"):
        if power == "Off":
            return PowerPlan([need("On", "ForceOn", "PushPowerButton")], "On")
        order = (
            ("ForceRestart", "GracefulRestart", "PowerCycle")
            if state == "restarted"
            else ("PowerCycle", "ForceRestart")
        )
        choice = _first(allowed_set, *order)
        if choice:
            return PowerPlan([choice], "On")
        return PowerPlan([need("ForceOff"), need("On", "ForceOn")], "On")
    raise ValueError(f"unknown power state {state!r}")


def allowed_resets(system: Any) -> list[str]:
    return sorted(getattr(v, "value", str(v)) for v in system.get_allowed_reset_system_values())


def current_power(client: Any) -> str:
    system = client.system
    return getattr(system.power_state, "value", str(system.power_state))


def read_power(client: Any) -> str:
    """One GET of the System (``system.refresh`` would also re-read its loaded sub-resources)."""
    return str(client.get_json(client.system_path(), "Reading the power state").get("PowerState") or "Unknown")


def wait_power(client: Any, target: str, timeout: float, *, sleep: Any = None) -> str:
    def observe() -> Poll[str]:
        value = normalise_power(read_power(client))
        return Poll(value == target, value)

    kwargs: dict[str, Any] = {"sleep": sleep} if sleep else {}
    return wait_for(observe, timeout=timeout, what=f"power state {target}", backoff=POWER_BACKOFF, **kwargs)


def execute(
    client: Any, plan: PowerPlan, timeout: float, graceful_timeout: float = GRACEFUL_OFF_TIMEOUT
) -> tuple[list[str], str]:
    """Send the plan's resets and wait for its target; returns (resets sent, power state seen)."""
    sent: list[str] = []
    system = client.system
    for index, reset in enumerate(plan.resets):
        client.call(f"Power action {reset}", system.reset_system, sushy.ResetType(reset))
        sent.append(reset)
        last = index == len(plan.resets) - 1
        if reset == "GracefulShutdown" and plan.force_after_graceful:
            try:
                wait_power(client, "Off", min(graceful_timeout, timeout))
            except WaitTimeout:
                client.call("Power action ForceOff", system.reset_system, sushy.ResetType.FORCE_OFF)
                sent.append("ForceOff")
        elif not last and reset == "ForceOff":
            wait_power(client, "Off", timeout)
    final = wait_power(client, plan.target, timeout) if sent else read_power(client)
    return sent, final


def graceful_timeout_message(last_seen: Any, timeout: float, force_off_after_timeout: bool) -> str:
    """Pure: why ``off`` timed out when GracefulShutdown was all it could send, and what to change."""
    why = (
        "the BMC does not offer ForceOff, so nothing could be forced"
        if force_off_after_timeout
        else "nothing was forced because force_off_after_timeout is false: set it to true to send ForceOff"
        " after graceful_timeout"
    )
    return (
        f"The server is still {last_seen!r} {timeout:g}s after GracefulShutdown: its operating system did not shut"
        f" down (it may ignore the power button, or hang); {why}. Raise wait_timeout if the shutdown is only slow."
    )


def reboot(client: Any, timeout: float) -> str:
    """Restart the host (or power it on) and wait until it is On again; returns the reset used."""
    plan = plan_power("restarted", read_power(client), allowed_resets(client.system))
    return ",".join(execute(client, plan, timeout)[0])


def ensure_power(
    client: Any, state: str, *, check_mode: bool, timeout: float, force_off_after_timeout: bool, graceful_timeout: float
) -> dict[str, Any]:
    before = current_power(client)
    plan = plan_power(state, before, allowed_resets(client.system), force_off_after_timeout)
    result: dict[str, Any] = {"changed": plan.changed, "power_state_before": before, "planned": list(plan.resets)}
    if check_mode or not plan.changed:
        result["power_state"] = before
        result["actions"] = []
        return result
    try:
        sent, final = execute(client, plan, timeout, graceful_timeout)
    except WaitTimeout as exc:
        if plan.resets == ["GracefulShutdown"] and not plan.force_after_graceful:
            message = graceful_timeout_message(exc.last_seen, timeout, force_off_after_timeout)
            raise WaitTimeout(message, last_seen=exc.last_seen) from exc
        raise
    result["actions"] = sent
    result["forced"] = "ForceOff" in sent and state == "off"
    result["power_state"] = final
    return result
