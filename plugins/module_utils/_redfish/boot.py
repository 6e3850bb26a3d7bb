# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot planning (pure functions) and its execution per BMC generation.

Why: on iDRAC8 the boot order does not stick across provisioning, ``Cd`` boots the physical drive
and every ``BootSourceOverrideMode`` write may cost a BIOS job and a reboot. The planners decide,
from desired and observed state only, what must be written (nothing when it already matches, the
mode never when unchanged, the full order as the BMC wants it); ``apply`` then writes it through
the generation's quirks, optionally reboots and waits for the BIOS job, and with
``verify_after_reboot`` re-reads the order after the boot and re-applies it once if it reverted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError, InputError
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for

from . import power
from .errors import PreconditionFailed, RedfishError
from .quirks import BootOps, BootOrderState
from .quirks.generic import DEVICE_TARGETS

DEVICES = tuple(DEVICE_TARGETS)
MODES = ("UEFI", "Legacy")
JOB_BACKOFF = Backoff(initial=2.0, cap=15.0, factor=1.5, jitter=0.1)
JOB_DONE = {"Completed", "CompletedWithErrors"}
JOB_FAILED = {"Failed", "Aborted", "Cancelled"}
# Kinds of persistent boot entries ``first`` can put at the front. A boot entry's kind is read from its id and
# display names, in this order (the first rule that matches wins, so an optical drive on a SATA port is never
# taken for a disk): Dell FQDDs (``Optical.iDRACVirtual.1-1``, ``HardDisk.List.1-1``, ``RAID.Integrated.1-1``,
# ``NIC.Integrated.1-1-1``) and the UEFI display names firmware gives BootOptions ("Virtual Optical Drive",
# "RAID Controller in SL 3: ...", "PXE Device 1: ...").
FIRST_KINDS = ("hdd", "virtual_cd")
_KIND_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("virtual_cd", re.compile(r"idracvirtual|virtual\s*(optical|cd|dvd|media|floppy)|\bvirtual\b", re.I)),
    ("optical", re.compile(r"optical|\bcd\b|dvd|cdrom", re.I)),
    ("pxe", re.compile(r"\bnic\b|nic\.|pxe|network|ipv4|ipv6|http", re.I)),
    ("hdd", re.compile(r"harddisk|hard\s*(disk|drive)|\bhdd\b|raid|\bdisk\b|nvme|\bssd\b|ahci|\bsas\b|sata", re.I)),
)


@dataclass
class BootPlan:
    mode: str | None = None  # new mode, None = unchanged or not asked
    order: list[str] | None = None  # full new order, None = unchanged or not asked
    override: dict[str, Any] | None = None  # {"device", "persistent", "method"}
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.mode or self.order is not None or self.override)


def plan_mode(desired: str | None, observed: str | None) -> str | None:
    """The mode to write: None when not asked or already set (never re-send an unchanged mode)."""
    if desired is None or (observed or "").lower() == desired.lower():
        return None
    return desired


def plan_order(desired: list[str] | None, state: BootOrderState) -> list[str] | None:
    """Full new order (wanted entries first, the rest in their current order), None if unchanged.

    Entries may be ids or display names; unknown or duplicate entries raise InputError naming them.
    """
    if not desired:
        return None
    resolved: list[str] = []
    for item in desired:
        ident = state.names.get(item) or (item if item in state.order else None)
        if ident is None:
            known = sorted(set(state.names) | set(state.order))
            raise InputError("order", f"{item!r} is not a boot entry of this BMC; known entries: {', '.join(known)}")
        if ident in resolved:
            raise InputError("order", f"{item!r} is listed twice (as {ident!r})")
        resolved.append(ident)
    new_order = resolved + [ident for ident in state.order if ident not in resolved]
    return None if new_order == state.order else new_order


def entry_kind(*texts: str | None) -> str | None:
    """Pure: the kind (``virtual_cd``, ``optical``, ``pxe``, ``hdd``) of a boot entry from its id and names."""
    joined = " ".join(t for t in texts if t)
    return next((kind for kind, rule in _KIND_RULES if rule.search(joined)), None)


def first_entry(kind: str, state: BootOrderState) -> str:
    """Pure: the id of the first entry of ``kind`` in the persistent order; InputError naming the entries if none."""
    aliases: dict[str, list[str]] = {ident: [ident] for ident in state.order}
    for alias, ident in state.names.items():
        aliases.setdefault(ident, []).append(alias)
    for ident in state.order:
        if entry_kind(*aliases.get(ident, [ident])) == kind:
            return ident
    listed = ", ".join(" / ".join(dict.fromkeys(aliases.get(i, [i]))) for i in state.order)
    raise InputError("first", f"the BMC's boot order has no {kind} entry (entries: {listed or 'none'})")


def plan_override(
    device: str | None, persistent: bool, observed: dict[str, Any], quirks_name: str
) -> dict[str, Any] | None:
    """The boot override to set, or None when the BMC already has it.

    iDRAC8 ``virtual_cd`` goes through Dell's SCP import, whose effect is not visible in the
    System resource, so it is always applied (one action, reported as changed).
    """
    if device is None:
        return None
    if device not in DEVICE_TARGETS:
        raise InputError("device", f"{device!r} is not one of {', '.join(DEVICES)}")
    enabled = "Continuous" if persistent else "Once"
    if device == "virtual_cd" and quirks_name == "dell_idrac8":
        return {"device": device, "persistent": persistent, "method": "dell_scp"}
    if observed.get("target") == DEVICE_TARGETS[device] and observed.get("enabled") == enabled:
        return None
    return {"device": device, "persistent": persistent, "method": "override"}


def _enum(value: Any) -> Any:
    return getattr(value, "value", value)


def observe_boot(client: Any) -> dict[str, Any]:
    boot = client.system.boot
    return {"target": _enum(boot.target), "enabled": _enum(boot.enabled), "mode": _enum(boot.mode)}


def wait_job(client: Any, job_id: str, timeout: float) -> str:
    path = f"{client.manager.path}/Jobs/{job_id}"

    def observe() -> Poll[str]:
        body = client.get_json(path, f"Reading job {job_id}")
        state = str(body.get("JobState") or body.get("TaskState") or "Unknown")
        if state in JOB_FAILED:
            raise RedfishError(f"BIOS configuration job {job_id} ended {state}: {body.get('Message', '')}")
        return Poll(state in JOB_DONE, state)

    return wait_for(observe, timeout=timeout, what=f"job {job_id} to complete", backoff=JOB_BACKOFF)


def apply(  # noqa: PLR0912 - one linear flow: plan, write, reboot, verify
    client: Any, quirks: BootOps, params: dict[str, Any], *, check_mode: bool
) -> dict[str, Any]:
    """Plan, then (unless check mode) write, reboot/wait if asked, and verify after reboot."""
    device = params.get("device")
    if device is not None and device not in DEVICE_TARGETS:
        raise InputError("device", f"{device!r} is not one of {', '.join(DEVICES)}")
    observed = observe_boot(client)
    if params.get("first") and params.get("order"):
        raise InputError("first", "give either first or order, not both")
    wants_order = bool(params.get("order") or params.get("first"))
    state: BootOrderState | None = quirks.read_boot_order(client) if wants_order else None
    if state is not None and params.get("first"):
        params = {**params, "order": [first_entry(params["first"], state)]}
    plan = BootPlan(
        mode=plan_mode(params.get("mode"), observed.get("mode")),
        order=plan_order(params.get("order"), state) if state else None,
        override=plan_override(device, bool(params.get("persistent")), observed, quirks.name),
    )
    before = {"override": observed}
    after: dict[str, Any] = {"override": dict(observed)}
    if state is not None:
        before["order"] = list(state.order)
        after["order"] = list(plan.order or state.order)
    if plan.mode:
        after["override"]["mode"] = plan.mode
    if plan.override:
        after["override"].update(
            target="VCD-DVD" if plan.override["method"] == "dell_scp" else DEVICE_TARGETS[plan.override["device"]],
            enabled="Continuous" if plan.override["persistent"] else "Once",
        )
    result: dict[str, Any] = {
        "changed": plan.changed,
        "quirks": quirks.name,
        "plan": {"mode": plan.mode, "order": plan.order, "override": plan.override},
        "diff": {"before": before, "after": after},
        "jobs": [],
        "actions": [],
        "reapplied": False,
        "rebooted": False,
    }
    if check_mode or not plan.changed:
        return result
    timeout = float(params.get("wait_timeout") or 900)
    jobs: list[str] = []
    if plan.mode:
        done = quirks.set_boot_mode(client, plan.mode)
        result["actions"].append(done)
        if done.get("job_id"):
            jobs.append(done["job_id"])
    if plan.order is not None and state is not None:
        _write_planned_order(client, quirks, params["order"], state, plan=plan, result=result, jobs=jobs)
    if any(action.get("needs_job") for action in result["actions"]):
        job_id = quirks.commit_bios(client)
        if job_id:
            jobs.append(job_id)
    if plan.override:
        result["actions"].append(quirks.set_one_time_boot(client, plan.override["device"], plan.override["persistent"]))
    result["jobs"] = jobs
    verify = bool(params.get("verify_after_reboot")) and plan.order is not None
    if (params.get("reboot") and result["changed"]) or verify:
        _reboot_and_wait_jobs(client, jobs, timeout)
        result["rebooted"] = True
    if verify and plan.order is not None:
        _verify_order(client, quirks, plan.order, result, timeout)
    client.forget()
    return result


def _write_planned_order(
    client: Any,
    quirks: BootOps,
    desired: list[str],
    state: BootOrderState,
    *,
    plan: BootPlan,
    result: dict[str, Any],
    jobs: list[str],
) -> None:
    """``write_order`` for ``apply``; after a re-plan the result shows the order it was made from."""
    done, written, seen = write_order(client, quirks, desired, state, plan.order or [])
    if seen is not state:  # a 412: re-read and re-planned after a concurrent change
        plan.order = written
        result["plan"]["order"] = written
        result["diff"]["before"]["order"] = list(seen.order)
        result["diff"]["after"]["order"] = list(written or seen.order)
        result["changed"] = plan.changed
    if done is not None:
        result["actions"].append(done)
        if done.get("job_id"):
            jobs.append(done["job_id"])


def write_order(
    client: Any, quirks: BootOps, desired: list[str], state: BootOrderState, planned: list[str]
) -> tuple[dict[str, Any] | None, list[str] | None, BootOrderState]:
    """Write ``planned`` guarded by the ETag of ``state``; on a 412 re-read, re-plan, retry once.

    A 412 means another writer changed the System between our read and our PATCH. The order is
    read again (with its new ETag) and planned again from ``desired``: when the other writer's
    order already satisfies it, nothing is written; else the new plan is sent once with the new
    ETag. A second 412 raises ``ConflictError``: a plan made from a stale read is never written.
    Returns ``(action or None, order written or None, state the plan was made from)``.
    """
    try:
        return quirks.set_boot_order(client, state, planned), planned, state
    except PreconditionFailed:
        pass
    client.forget()
    fresh = quirks.read_boot_order(client)
    replanned = plan_order(desired, fresh)
    if replanned is None:
        return None, None, fresh
    try:
        done = quirks.set_boot_order(client, fresh, replanned)
    except PreconditionFailed as exc:
        raise ConflictError(
            "order: another writer changed the boot order on the BMC while this task was writing it (HTTP 412"
            " twice: the ETag read before each write no longer matched). Nothing stale was written. Find what"
            " else manages this server's boot order (another playbook, a provisioning system, a person in the"
            " BMC's web UI), let one of them own it, and run the task again.",
            details={"field": "order", "wanted": list(desired), "found": list(fresh.order)},
        ) from exc
    return {**done, "replanned": True}, replanned, fresh


def _verify_order(client: Any, quirks: BootOps, wanted: list[str], result: dict[str, Any], timeout: float) -> None:
    """After the reboot: read the order back; if the BMC reverted it, write it again once."""
    for attempt in range(2):
        client.forget()
        now = quirks.read_boot_order(client)
        if now.order == wanted:
            break
        if attempt == 1:
            raise ConflictError(
                f"The BMC reverted the boot order again after re-applying it: wanted {wanted}, found {now.order}",
                details={"wanted": wanted, "found": now.order},
            )
        done = write_order(client, quirks, wanted, now, wanted)[0]
        if done is None:  # another writer put it back meanwhile
            break
        job_id = quirks.commit_bios(client) if done.get("needs_job") else done.get("job_id")
        result["actions"].append({**done, "reapply": True, "job_id": job_id})
        if job_id:
            result["jobs"].append(job_id)
        result["reapplied"] = True
        _reboot_and_wait_jobs(client, [job_id] if job_id else [], timeout)


def _reboot_and_wait_jobs(client: Any, jobs: list[str], timeout: float) -> None:
    power.reboot(client, timeout)
    for job_id in jobs:
        wait_job(client, job_id, timeout)
