# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a BareMetalHost stands on its way to a goal, read from its status: done, on its way, or stuck.

Why a deadline per state and not one overall: Metal3 walks a host through several states, each with its own
normal duration (registration takes seconds, inspection and provisioning a boot each, cleaning a boot more), and a
host that hangs hangs in one of them. One overall timeout sized for the slowest path notices a registration that
never ends an hour late; a deadline per state notices it when registration overruns, and the failure names that
state with Metal3's own ``operationalStatus``, ``errorType`` and ``errorMessage``.

Why a recovery hint: the reference user's iDRAC8 hits two failures Ironic does not get out of alone (their
Crossplane operation ``unstick-vmedia-boot``). The one-time boot of the virtual CD loses to an OS on the disk, so
the deploy ramdisk never starts and the host hangs in inspecting, provisioning or deprovisioning (or errors): the
cure is the virtual CD ahead of the disk in the persistent boot order and a reset. "Virtual media mount failed" is
cured only by an iDRAC reset. The hint says which, and the role runs it with the Redfish modules and waits again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import bmh as b

GOAL_PROVISIONED = "provisioned"
GOAL_RELEASED = "released"  # available (cleaned) and powered off
GOALS = (GOAL_PROVISIONED, GOAL_RELEASED)

# Seconds a host may stay in each state on its way to a goal before the wait fails (``state_timeouts`` overrides).
# Sized for an R730: a POST takes about 90 s and inspection, provisioning and cleaning each boot the ramdisk.
DEFAULT_STATE_TIMEOUTS: dict[str, int] = {
    b.STATE_NONE: 300,  # the operator has not picked the host up: is baremetal-operator running?
    b.STATE_REGISTERING: 600,
    b.STATE_INSPECTING: 1800,
    b.STATE_PREPARING: 1800,
    b.STATE_MATCH_PROFILE: 600,
    b.STATE_AVAILABLE: 600,  # image set, online: the operator starts provisioning
    b.STATE_READY: 600,
    b.STATE_PROVISIONING: 3600,
    b.STATE_PROVISIONED: 600,  # powering off after a deprovision was asked
    b.STATE_DEPROVISIONING: 3600,
}
STATE_TIMEOUT_KEYS = tuple(k for k in DEFAULT_STATE_TIMEOUTS if k)

RECOVER_BOOT_ORDER = "boot_order"
RECOVER_BMC_RESET = "bmc_reset"
# errorMessage text of a virtual-media failure (Ironic's redfish/idrac virtual-media interfaces); an iDRAC reset
# cures it, a boot order fix does not.
VIRTUAL_MEDIA_FAILURE_TEXT = ("virtual media mount failed", "unable to mount virtual media", "insert media")
# Error types whose cure can be the boot order (the ramdisk never ran).
BOOT_ERROR_TYPES = ("inspection error", "provisioning error", "preparation error")
# Ironic retries a failed step by itself (errorCount counts the tries); after this many a known cure is tried rather
# than waiting out the state's deadline, since a virtual-media or boot-order failure fails the same way every time.
ERRORS_BEFORE_RECOVERY = 2
# States in which the deploy ramdisk must boot from the virtual CD.
RAMDISK_STATES = (b.STATE_INSPECTING, b.STATE_PREPARING, b.STATE_PROVISIONING, b.STATE_DEPROVISIONING)
# States that never lead to the goal. Deprovisioning on the way to provisioned (a present after an interrupted
# absent) and provisioning on the way to released are not among them: with the image set again (or cleared),
# baremetal-operator finishes the step under way and then turns back.
DEAD_ENDS = {
    GOAL_PROVISIONED: (b.STATE_POWERING_OFF_BEFORE_DELETE, b.STATE_DELETING, b.STATE_UNMANAGED),
    GOAL_RELEASED: (b.STATE_POWERING_OFF_BEFORE_DELETE, b.STATE_DELETING, b.STATE_UNMANAGED),
}


@dataclass(frozen=True)
class Verdict:
    """One look at the host: ``done``, or ``failed`` with why and a recovery hint, or neither (keep waiting)."""

    done: bool
    status: Mapping[str, Any]
    failed: bool = False
    reason: str | None = None
    recovery: str | None = None


def recovery_for(status: Mapping[str, Any], *, stuck: bool) -> str | None:
    """The Redfish cure for an error or a hang in a ramdisk state, or None when none is known to help."""
    message = str(status.get("error_message") or "").lower()
    if any(text in message for text in VIRTUAL_MEDIA_FAILURE_TEXT):
        return RECOVER_BMC_RESET
    if status.get("error_type") in BOOT_ERROR_TYPES:
        return RECOVER_BOOT_ORDER
    if stuck and status.get("state") in RAMDISK_STATES:
        return RECOVER_BOOT_ORDER
    return None


def reached(goal: str, status: Mapping[str, Any]) -> bool:
    state = status.get("state")
    if goal == GOAL_PROVISIONED:
        return state == b.STATE_PROVISIONED and status.get("operational_status") != b.OPERATIONAL_ERROR
    return state in b.FREE_STATES and status.get("powered_on") is False


def describe(status: Mapping[str, Any]) -> str:
    state = status.get("state") or "(not yet picked up by baremetal-operator)"
    text = f"state {state}, operationalStatus {status.get('operational_status') or '-'}"
    text += f", poweredOn {status.get('powered_on')}"
    if status.get("error_type") or status.get("error_message"):
        text += f", {status.get('error_type') or 'error'} ({status.get('error_count')}x): {status.get('error_message')}"
    return text


@dataclass
class StateClock:
    """Measures how long the host has been in its current state (monotonic clock, injectable for tests)."""

    clock: Callable[[], float]
    timeouts: Mapping[str, int]
    state: str | None = None
    since: float = 0.0
    history: list[tuple[str, float]] = field(default_factory=list)

    def observe(self, state: str) -> float:
        """Record ``state``; the seconds spent in it so far."""
        now = self.clock()
        if state != self.state:
            self.state, self.since = state, now
            self.history.append((state, now))
        return now - self.since

    def limit(self, state: str) -> int:
        return int(self.timeouts.get(state, max(self.timeouts.values(), default=3600)))


def judge(goal: str, host: Mapping[str, Any], clock: StateClock, *, errors_before: int = 0) -> Verdict:
    """Decide one observation of ``host`` (a BareMetalHost) on the way to ``goal``.

    ``errors_before``: the ``errorCount`` a wait after a recovery found, which is not counted again. BMO clears the
    error only when Ironic's retry completes, so right after the cure the host still shows the errors that asked
    for it; only errors since then may fail the wait before the state's deadline.
    """
    status = b.status_of(host)
    if reached(goal, status):
        return Verdict(done=True, status=status)
    state = str(status.get("state") or "")
    spent = clock.observe(state)
    if state in DEAD_ENDS[goal]:
        return Verdict(
            done=False,
            failed=True,
            status=status,
            reason=f"the host went to {state!r}, which does not lead to {goal}: {describe(status)}",
        )
    # An error in a stable state does not heal by waiting (a registration error: wrong credentials or address).
    errored = status.get("operational_status") == b.OPERATIONAL_ERROR
    if errored and state in (b.STATE_REGISTERING, b.STATE_NONE):
        return Verdict(
            done=False, failed=True, status=status, reason=f"registration failed: {describe(status)}", recovery=None
        )
    if errored and int(status.get("error_count") or 0) - errors_before >= ERRORS_BEFORE_RECOVERY:
        recovery = recovery_for(status, stuck=False)
        if recovery is not None:
            return Verdict(
                done=False,
                failed=True,
                status=status,
                reason=f"Ironic failed {status.get('error_count')} times in {state!r}: {describe(status)}",
                recovery=recovery,
            )
    if spent >= clock.limit(state):
        stuck = not errored
        return Verdict(
            done=False,
            failed=True,
            status=status,
            reason=f"the host stayed {clock.limit(state)} s in {state or 'no state'!r}: {describe(status)}",
            recovery=recovery_for(status, stuck=stuck),
        )
    return Verdict(done=False, status=status)
