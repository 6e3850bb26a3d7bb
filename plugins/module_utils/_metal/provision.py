# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a claimed host stands in its install, and what is left to do: the provisioner's decisions, pure.

Why a record on the claim: a run may be killed at any step and run again (from this controller or another),
and the BMC alone cannot tell every step apart. A server that is off with the installer ISO in its virtual
drive has either finished its install (the installer powered it off) or was never powered on for it; a
server that is off with nothing inserted has either never been installed or lost its power after an install.
So the claim's Lease keeps a small record (``claims.PROVISIONING_ANNOTATION``): the generation it is about,
its phase (``preparing`` -> ``installing`` -> ``installed`` -> ``wiped``), the install disk and the SSH host key
of that install, and the persistent boot order before this collection first changed it. ``installing`` is
recorded in the same module call that powers the server on for the install, so no run can see one without the
other. The record is written with the Lease's ``resourceVersion`` like the claim itself.

From the record, the BMC's power and virtual media, and an SSH probe (the pinned host key, the marker file
the install wrote), ``plan_present`` and ``plan_absent`` decide the status and the remaining steps; the role
runs exactly those steps. A host the record calls installed is never installed again for that generation:
found powered off it is powered on (a recovery), found booting it is waited for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError

# Phases of one generation's install, in order (the record names the generation they belong to).
PREPARING, INSTALLING, INSTALLED, WIPED = "preparing", "installing", "installed", "wiped"
PHASES = (PREPARING, INSTALLING, INSTALLED, WIPED)

# Step names the role keys its tasks on (``when: "'<step>' in plan.steps"``), in the order they run.
STEP_POWER_OFF = "power_off"
STEP_PREPARE = "prepare"
STEP_VIRTUAL_CD_FIRST = "virtual_cd_first"
STEP_BUILD_ISO = "build_iso"
STEP_INSERT = "insert_media"
STEP_BOOT_ONCE = "boot_once"
STEP_INSTALL = "install"
STEP_WAIT_INSTALLED = "wait_installed"
STEP_EJECT = "eject"
STEP_DISK_FIRST = "disk_first"
STEP_POWER_ON = "power_on"
STEP_RECOVER = "recover"  # power on a host that is installed but found off (reported as a recovery)
STEP_WAIT_SSH = "wait_ssh"
STEP_RECORD_INSTALLED = "record_installed"
STEP_WIPE = "wipe"
STEP_RESTORE_BOOT_ORDER = "restore_boot_order"
STEP_RELEASE = "release"
STEP_DELETE_ISO = "delete_iso"

# What the install writes (``unattended.MARKER_PATH``): one JSON line, cluster and generation.
MARKER_PATH = "/etc/metalplane/provisioned"
# The alias the pinned host key is filed under in the probe's known_hosts (independent of address and port).
HOST_KEY_ALIAS = "metalplane-node"


# --------------------------------------------------------------------------------------------- record
def phase_of(record: Mapping[str, Any], generation: int) -> str | None:
    """The recorded phase of ``generation``; a record about another generation says nothing about this one."""
    if record.get("generation") != generation:
        return None
    phase = record.get("phase")
    return phase if phase in PHASES else None


def updated_record(
    record: Mapping[str, Any],
    generation: int,
    *,
    phase: str | None = None,
    root_disk: Mapping[str, str] | None = None,
    ssh_host_key: str | None = None,
    boot_order: Sequence[str] | None = None,
    since: str | None = None,
) -> dict[str, Any]:
    """The record after one step (pure). A new generation starts afresh but keeps the boot order recorded
    before this collection first changed it: that is the order a teardown restores, whatever happened since."""
    if record.get("generation") == generation:
        new = dict(record)
    else:
        new = {"generation": generation, **({"boot_order": record["boot_order"]} if record.get("boot_order") else {})}
    if phase is not None:
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}")
        new["phase"] = phase
        if since:
            new[f"{phase}_since"] = since
    if root_disk:
        new["root_disk"] = dict(root_disk)
    if ssh_host_key:
        new["ssh_host_key"] = ssh_host_key
    if boot_order and not new.get("boot_order"):
        new["boot_order"] = list(boot_order)
    return new


def record_json(record: Mapping[str, Any]) -> str:
    return json.dumps(dict(record), sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------------------------- observations
@dataclass(frozen=True)
class SshProbe:
    """What one SSH login with the pinned host key found: the marker, the disks, or why it failed."""

    reachable: bool = False
    marker: Mapping[str, Any] | None = None
    disks: Sequence[Mapping[str, Any]] = ()
    error: str | None = None
    host_key_mismatch: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "reachable": self.reachable,
            "marker": dict(self.marker) if self.marker is not None else None,
            "error": self.error,
            "host_key_mismatch": self.host_key_mismatch,
        }


@dataclass(frozen=True)
class Observed:
    """The host as seen now: its power, what is in its virtual CD, and the SSH probe (None: not probed)."""

    power: str
    media_image: str | None = None
    ssh: SshProbe | None = None


def marker_matches(marker: Mapping[str, Any] | None, cluster: str, generation: int) -> bool:
    if not marker:
        return False
    try:
        return str(marker.get("cluster")) == cluster and int(marker.get("generation", -1)) == generation
    except (TypeError, ValueError):
        return False


def parse_probe_output(stdout: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The marker and ``lsblk -J`` disks from the probe command's output (sections split by a line ``---``)."""
    marker_text, _sep, disks_text = stdout.partition("\n---\n")
    marker: dict[str, Any] | None = None
    for line in marker_text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            marker = value
            break
    disks: list[dict[str, Any]] = []
    try:
        parsed = json.loads(disks_text) if disks_text.strip() else {}
        disks = [d for d in parsed.get("blockdevices") or [] if isinstance(d, dict)]
    except (ValueError, AttributeError):
        disks = []
    return marker, disks


# --------------------------------------------------------------------------------------------- disks
def _norm_wwn(value: Any) -> str:
    text = str(value or "").strip().lower()
    for prefix in ("wwn-", "naa.", "eui.", "0x"):
        text = text.removeprefix(prefix)
    return text


def drive_matches(root_disk: Mapping[str, str], drive: Mapping[str, Any]) -> bool:
    """Whether a drive (Redfish ``storage`` entry or ``lsblk`` row) is the recorded disk, by WWN or serial."""
    if root_disk.get("wwn"):
        return bool(drive.get("wwn")) and _norm_wwn(drive.get("wwn")) == _norm_wwn(root_disk["wwn"])
    if root_disk.get("serial"):
        return str(drive.get("serial") or "").strip() == str(root_disk["serial"]).strip()
    return False


def wipe_device(root_disk: Mapping[str, str], disks: Sequence[Mapping[str, Any]]) -> str:
    """The device node to wipe for the recorded disk (pure): the one ``lsblk`` row that matches, else the udev
    by-id link of its WWN; refuses anything ambiguous, so a wipe never lands on the wrong disk."""
    matching = [d for d in disks if drive_matches(root_disk, d)]
    if len(matching) == 1 and matching[0].get("path"):
        return str(matching[0]["path"])
    if len(matching) > 1:
        names = ", ".join(str(d.get("path")) for d in matching)
        raise ConflictError(f"more than one disk matches the recorded install disk {dict(root_disk)}: {names}")
    if root_disk.get("wwn"):
        # udev's stable name for the disk (60-persistent-storage.rules: ENV{ID_WWN} -> disk/by-id/wwn-$env{ID_WWN}).
        return f"/dev/disk/by-id/wwn-0x{_norm_wwn(root_disk['wwn'])}"
    raise ConflictError(
        f"no disk on the host has the recorded serial {root_disk.get('serial')!r} (lsblk lists"
        f" {', '.join(str(d.get('serial')) for d in disks) or 'none'}); nothing was wiped"
    )


# --------------------------------------------------------------------------------------------- inventory
VIRTUAL_MEDIA_MISSING = (
    "virtual media: the BMC offers no virtual CD/DVD slot, so nothing can be installed through it (a Dell needs the"
    " iDRAC Enterprise licence for virtual media; iDRAC8 Express has none): install the licence or use another host"
)


def inventory_problems(facts: Mapping[str, Any], root_disk: Mapping[str, str]) -> list[str]:
    """What stops an install through this BMC (pure, from ``redfish_info`` facts): no virtual media, or a
    recorded install disk the storage inventory does not show exactly once (only when it lists drives)."""
    problems: list[str] = []
    if not facts.get("virtual_media_available"):
        problems.append(VIRTUAL_MEDIA_MISSING)
    drives = list(facts.get("storage") or [])
    if root_disk and drives:
        matching = [d for d in drives if drive_matches(root_disk, d)]
        if len(matching) != 1:
            seen = "; ".join(f"{d.get('name')} wwn={d.get('wwn')} serial={d.get('serial')}" for d in drives)
            problems.append(
                f"root_disk: {dict(root_disk)} matches {len(matching)} of the BMC's drives ({seen}); it must match"
                " exactly one: write the WWN or serial the storage inventory shows"
            )
    return problems


# --------------------------------------------------------------------------------------------- plans
@dataclass
class Plan:
    status: str
    steps: list[str] = field(default_factory=list)
    why: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "steps": list(self.steps), "why": self.why}


INSTALL_STEPS = [
    STEP_POWER_OFF,
    STEP_PREPARE,
    STEP_VIRTUAL_CD_FIRST,
    STEP_BUILD_ISO,
    STEP_INSERT,
    STEP_BOOT_ONCE,
    STEP_INSTALL,
    STEP_WAIT_INSTALLED,
    STEP_EJECT,
    STEP_DELETE_ISO,
    STEP_DISK_FIRST,
    STEP_POWER_ON,
    STEP_WAIT_SSH,
    STEP_RECORD_INSTALLED,
]


def install_steps(*, virtual_cd_fix: bool, disk_first: bool) -> list[str]:
    """A whole install's steps, the two persistent boot-order changes only where they are wanted."""
    skipped = {STEP_VIRTUAL_CD_FIRST: not virtual_cd_fix, STEP_DISK_FIRST: not disk_first}
    return [step for step in INSTALL_STEPS if not skipped.get(step, False)]


def plan_present(  # noqa: PLR0911 - one return per status, in the order they are checked
    record: Mapping[str, Any],
    observed: Observed,
    *,
    cluster: str,
    generation: int,
    virtual_cd_fix: bool,
    disk_first: bool = False,
) -> Plan:
    """Where the host stands for ``generation`` and what is left (pure).

    ``virtual_cd_fix``: the BMC needs its virtual CD moved ahead of the disk in the persistent order (iDRAC8,
    where the one-time boot can lose to an OS on the disk) and it is not there yet. ``disk_first``: put the disk
    first again after the install, before the power-on from it. Off by default: on iDRAC8 each change of the
    persistent order is a BIOS job with a POST of its own (minutes on an R730); the virtual CD is empty after the
    eject, so the server boots its disk either way, and the teardown restores the order recorded before the install.
    """
    phase = phase_of(record, generation)
    on = observed.power == "On"
    media = bool(observed.media_image)
    ssh = observed.ssh
    if ssh is not None and ssh.reachable and marker_matches(ssh.marker, cluster, generation):
        steps = [STEP_EJECT] if media else []
        if phase != INSTALLED:  # a run killed after the eject: the ISO may still be served
            steps += [STEP_DELETE_ISO, STEP_RECORD_INSTALLED]
        return Plan("provisioned", steps, f"SSH answers with the pinned key and the marker of generation {generation}")
    if phase == INSTALLED:
        eject = [STEP_EJECT] if media else []
        if not on:
            return Plan(
                "powered_off",
                [*eject, STEP_RECOVER, STEP_WAIT_SSH],
                f"installed for generation {generation} and found {observed.power}: powered on again, not reinstalled",
            )
        return Plan("booting", [*eject, STEP_WAIT_SSH], "installed and powered on; SSH does not answer yet")
    if phase == INSTALLING:
        # The ISO (it holds the host's secrets) is deleted in every plan of this phase, not only with the eject: a
        # run killed between the eject and the deletion finds no media and would otherwise leave it served.
        after = [*([STEP_DISK_FIRST] if disk_first else []), STEP_POWER_ON, STEP_WAIT_SSH, STEP_RECORD_INSTALLED]
        if on and media:
            return Plan(
                "installing",
                [STEP_WAIT_INSTALLED, STEP_EJECT, STEP_DELETE_ISO, *after],
                "the installer runs from the virtual CD",
            )
        if media:
            return Plan(
                "install_finished", [STEP_EJECT, STEP_DELETE_ISO, *after], "the installer powered the server off"
            )
        if not on:
            return Plan("ejected", [STEP_DELETE_ISO, *after], "installed and ejected; not powered on from the disk yet")
        return Plan(
            "booting",
            [STEP_DELETE_ISO, STEP_WAIT_SSH, STEP_RECORD_INSTALLED],
            "booting the installed system from its disk",
        )
    steps = install_steps(virtual_cd_fix=virtual_cd_fix, disk_first=disk_first)
    why = "no install of this generation was started"
    if ssh is not None and ssh.reachable:
        why = f"the system on the host carries marker {dict(ssh.marker or {})}, not this claim's generation"
    return Plan("new", steps, why)


def plan_absent(record: Mapping[str, Any], observed: Observed, *, cluster: str) -> tuple[Plan, dict[str, Any]]:
    """The teardown of the cluster's host (pure): the plan, and what would be wiped (``wipe``: the recorded
    disk, the device found for it, how). Refuses a host whose system says it belongs to another cluster."""
    ssh = observed.ssh
    root_disk = dict(record.get("root_disk") or {})
    phase = record.get("phase")
    installed_any = phase in (INSTALLING, INSTALLED) and bool(root_disk)
    wipe: dict[str, Any] = {"disk": root_disk or None, "device": None, "via": None}
    steps: list[str] = []
    if ssh is not None and ssh.reachable and ssh.marker and str(ssh.marker.get("cluster")) != cluster:
        raise ConflictError(
            f"the host's installed system says it belongs to cluster {ssh.marker.get('cluster')!r}, not {cluster!r};"
            " nothing was wiped or powered off: check the inventory (node address, pool) before tearing down",
            details={"marker": dict(ssh.marker)},
        )
    if installed_any:
        if ssh is not None and ssh.reachable:
            wipe.update(device=wipe_device(root_disk, ssh.disks), via="ssh")
            steps.append(STEP_WIPE)
        elif observed.power != "On" and phase == INSTALLED:
            # The installed system is off: boot it from its disk, then wipe over SSH.
            wipe.update(via="ssh after power on")
            steps += [STEP_RECOVER, STEP_WAIT_SSH, STEP_WIPE]
        else:
            wipe.update(via="unreachable")
            steps.append(STEP_WIPE)
    if observed.media_image:
        steps.append(STEP_EJECT)
    if record.get("boot_order"):
        steps.append(STEP_RESTORE_BOOT_ORDER)
    steps += [STEP_POWER_OFF, STEP_RELEASE, STEP_DELETE_ISO]
    status = "installed" if installed_any else ("wiped" if phase == WIPED else "not installed")
    why = (
        f"wipe {root_disk} ({wipe['via']})"
        if STEP_WIPE in steps
        else ("the install disk was wiped already" if phase == WIPED else "nothing was installed")
    )
    return Plan(status, steps, why), wipe
