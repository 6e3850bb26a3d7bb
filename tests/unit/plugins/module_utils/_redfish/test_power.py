"""Power planning: reset values chosen from AllowableValues, idempotency."""

from __future__ import annotations

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import UnsupportedError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.power import plan_power

FULL = ["On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle", "PushPowerButton"]
IDRAC8_LIKE = ["On", "ForceOff", "GracefulRestart", "PushPowerButton"]  # no ForceRestart, no GracefulShutdown


@pytest.mark.parametrize(
    ("state", "current", "allowed", "force", "resets", "target", "fallback"),
    [
        ("on", "Off", FULL, True, ["On"], "On", False),
        ("on", "On", FULL, True, [], "On", False),
        ("on", "PoweringOn", FULL, True, [], "On", False),
        ("on", "Off", ["ForceOn"], True, ["ForceOn"], "On", False),
        ("forced_off", "On", FULL, True, ["ForceOff"], "Off", False),
        ("forced_off", "Off", FULL, True, [], "Off", False),
        ("off", "On", FULL, True, ["GracefulShutdown"], "Off", True),
        ("off", "On", FULL, False, ["GracefulShutdown"], "Off", False),
        ("off", "PoweringOff", FULL, True, [], "Off", False),
        ("off", "On", IDRAC8_LIKE, True, ["ForceOff"], "Off", False),
        ("restarted", "On", FULL, True, ["ForceRestart"], "On", False),
        ("restarted", "On", IDRAC8_LIKE, True, ["GracefulRestart"], "On", False),
        ("restarted", "Off", FULL, True, ["On"], "On", False),
        ("cycled", "On", FULL, True, ["PowerCycle"], "On", False),
        ("cycled", "On", ["On", "ForceOff"], True, ["ForceOff", "On"], "On", False),
        ("on", "Off", None, True, ["On"], "On", False),  # no AllowableValues advertised: standard values
    ],
)
def test_plan_power(  # noqa: PLR0917
    state: str, current: str, allowed: list[str] | None, force: bool, resets: list[str], target: str, fallback: bool
) -> None:
    plan = plan_power(state, current, allowed, force)
    assert plan.resets == resets
    assert plan.target == target
    assert plan.force_after_graceful is fallback
    assert plan.changed is bool(resets)


@pytest.mark.parametrize(
    ("state", "allowed", "force"),
    [("off", IDRAC8_LIKE, False), ("forced_off", ["On"], True), ("on", ["ForceOff"], True)],
)
def test_plan_power_unsupported(state: str, allowed: list[str], force: bool) -> None:
    with pytest.raises(UnsupportedError):
        plan_power(state, "On" if state != "on" else "Off", allowed, force)
