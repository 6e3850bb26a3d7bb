"""``state: off`` when GracefulShutdown is all the module may send and the OS ignores it.

The error must say what happened (still on after GracefulShutdown) and the one option that
changes the outcome; a wait that included ForceOff keeps the plain timeout.
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import WaitTimeout
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.power import (
    ensure_power,
    graceful_timeout_message,
)

FULL = ["On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle"]
NO_FORCE_OFF = ["On", "GracefulShutdown", "GracefulRestart"]


class _Value:
    def __init__(self, value: str) -> None:
        self.value = value


class _System:
    """A host whose OS ignores every reset: the power state never changes."""

    def __init__(self, allowed: list[str]) -> None:
        self.power_state = _Value("On")
        self.allowed = allowed
        self.sent: list[str] = []

    def get_allowed_reset_system_values(self) -> list[_Value]:
        return [_Value(v) for v in self.allowed]

    def reset_system(self, reset_type: Any) -> None:
        self.sent.append(reset_type.value)


class _Client:
    def __init__(self, allowed: list[str]) -> None:
        self.system = _System(allowed)

    def call(self, _doing: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def system_path(self) -> str:
        return "/redfish/v1/Systems/1"

    def get_json(self, _path: str, _doing: str) -> dict[str, Any]:
        return {"PowerState": self.system.power_state.value}


@pytest.mark.parametrize(
    ("allowed", "force", "sent", "says", "not_says"),
    [
        (FULL, False, ["GracefulShutdown"], "force_off_after_timeout is false", "does not offer ForceOff"),
        (NO_FORCE_OFF, True, ["GracefulShutdown"], "does not offer ForceOff", "force_off_after_timeout is false"),
        (FULL, True, ["GracefulShutdown", "ForceOff"], "waiting for power state Off", "after GracefulShutdown"),
    ],
    ids=["forcing-not-allowed", "force-off-not-offered", "forced-but-still-on"],
)
def test_off_that_never_happens(allowed: list[str], force: bool, sent: list[str], says: str, not_says: str) -> None:
    client = _Client(allowed)
    with pytest.raises(WaitTimeout) as caught:
        ensure_power(client, "off", check_mode=False, timeout=0, force_off_after_timeout=force, graceful_timeout=0)
    assert client.system.sent == sent
    assert says in caught.value.msg
    assert not_says not in caught.value.msg
    assert caught.value.last_seen == "On"


@pytest.mark.parametrize(
    ("last_seen", "timeout", "force", "expected"),
    [
        (
            "On",
            120,
            False,
            "The server is still 'On' 120s after GracefulShutdown: its operating system did not shut down (it may"
            " ignore the power button, or hang); nothing was forced because force_off_after_timeout is false: set"
            " it to true to send ForceOff after graceful_timeout. Raise wait_timeout if the shutdown is only slow.",
        ),
        (
            "On",
            2.5,
            True,
            "The server is still 'On' 2.5s after GracefulShutdown: its operating system did not shut down (it may"
            " ignore the power button, or hang); the BMC does not offer ForceOff, so nothing could be forced."
            " Raise wait_timeout if the shutdown is only slow.",
        ),
    ],
)
def test_graceful_timeout_message(last_seen: str, timeout: float, force: bool, expected: str) -> None:
    assert graceful_timeout_message(last_seen, timeout, force) == expected
