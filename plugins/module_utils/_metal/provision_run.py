# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bodies of ``host_provision_info`` (read, decide, optionally wait) and ``host_provision`` (one recorded step).

Why these two around the pure planners of ``provision.py``: the role sequences the Redfish and ISO modules, but
whether a step is still needed depends on what earlier runs did, which only the claim's record, the BMC and an
SSH login can tell together. ``host_provision_info`` gathers exactly that (one Lease list, a few BMC reads, one
SSH login with the pinned host key) and returns the plan; ``host_provision`` writes the record at the steps
that make a later run's decision unambiguous, and powers the server on for the install in the same call that
records it.

The SSH probe uses the controller's OpenSSH client, the one Ansible's ``ssh`` connection uses: the host key
is pinned in a throw-away known_hosts file under an alias (``StrictHostKeyChecking=yes``), so a host that
answers with any other key is never trusted, and the login reads the marker file and ``lsblk``'s disks.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Optional

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ConflictError,
    InputError,
    MetalplaneError,
    WaitTimeout,
)
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for
from ansible_collections.metalplane.inference.plugins.module_utils._kube.object_store import Conflict

from . import claims as c
from . import provision as pv
from .claim_run import WRITE_ATTEMPTS, Inputs, _cluster, opened_store, require_sushy
from .pool import Host

# Seconds one SSH probe may take to connect (a powered-off host on a real network never answers).
SSH_CONNECT_TIMEOUT = 5
# Seconds the whole probe command may run (connect, log in, read two small outputs).
SSH_PROBE_TIMEOUT = 30
# What the probe runs on the node: the install's marker, then the disks with their WWN and serial.
PROBE_COMMAND = f"cat {pv.MARKER_PATH} 2>/dev/null; echo; echo ---; lsblk -J -d -o PATH,WWN,SERIAL 2>/dev/null || true"
# OpenSSH exits 255 on its own errors (connection, authentication, host key), else with the command's status.
SSH_ERROR_STATUS = 255
HOST_KEY_ERRORS = ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED")
WAIT_BACKOFF = Backoff(initial=2.0, cap=10.0, factor=1.5, jitter=0.1)
STEPS = ("prepare", "install", "wait_installed", "installed", "recover", "wiped")
# ``recovered_by`` of a recovery power-on: the timeline callback lists it as a recovery event.
RECOVERED_BY_POWER_ON = "power_on"
# ``recovered_by`` when the install put the installer ISO back after the BMC dropped it (an iDRAC reset ejects its
# virtual media: Dell documents that a racreset disconnects virtual media) and, under a running installer, restarted
# the server into it.
RECOVERED_BY_MEDIA = "media_reinserted"
# Polls in a row that must see the server on with its virtual CD empty before the installer counts as stranded: one
# read taken while a restarting BMC rebuilds its media service must never restart a good install.
MEDIA_GONE_POLLS = 2
# The most restarts of an installer that lost its media one wait allows: a BMC that keeps dropping it needs a person.
MAX_MEDIA_RETRIES = 5
# Seconds a restart into the installer built from ForceOff and On may take to show the server off in between.
RESTART_POWER_TIMEOUT = 300
# Polls in a row that must see the server off after such a restart before the install counts as finished: a BMC that
# restarts with a power cycle shows it off for a moment, which is not the installer's final power-off. (The wait
# does not look for the server on in between: a fast installer, the lab's, may be done before the first poll.)
OFF_POLLS_AFTER_RESTART = 2

# typing.Optional, not "|": pylint (ansible-test sanity) rejects "|" between types outside annotations.
Prober = Callable[[Mapping[str, Any], Optional[str]], pv.SshProbe]  # noqa: UP045


# --------------------------------------------------------------------------------------------- ssh
def ssh_probe(ssh: Mapping[str, Any], host_key: str | None) -> pv.SshProbe:
    """One login to the node with the pinned ``host_key``: its marker and disks, or why it failed."""
    if not host_key:
        return pv.SshProbe(error="no SSH host key is recorded for this install")
    if not ssh.get("address"):
        return pv.SshProbe(error="no node address to probe")
    binary = shutil.which("ssh")
    if binary is None:
        return pv.SshProbe(error="the OpenSSH client (ssh) is not installed on the controller")
    key_type, _sep, rest = host_key.strip().partition(" ")
    key_data = rest.split()[0] if rest.split() else ""
    with tempfile.TemporaryDirectory(prefix="mp-probe-") as directory:
        known_hosts = Path(directory) / "known_hosts"
        known_hosts.write_text(f"{pv.HOST_KEY_ALIAS} {key_type} {key_data}\n")
        command = [
            binary,
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={known_hosts}",
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", f"HostKeyAlias={pv.HOST_KEY_ALIAS}",
            "-o", f"ConnectTimeout={int(ssh.get('connect_timeout') or SSH_CONNECT_TIMEOUT)}",
            "-o", "IdentitiesOnly=yes",
            "-o", "LogLevel=ERROR",
            "-p", str(int(ssh.get("port") or 22)),
            "-l", str(ssh.get("user") or "root"),
        ]  # fmt: skip
        if ssh.get("private_key_file"):
            command += ["-i", str(Path(str(ssh["private_key_file"])).expanduser())]
        command += [str(ssh["address"]), PROBE_COMMAND]
        try:
            # A fixed argv, no shell, on the controller; the prober is injectable (tests), so it has no module to call
            # run_command on.
            done = subprocess.run(  # pylint: disable=ansible-bad-function
                command,
                capture_output=True,
                text=True,
                timeout=SSH_PROBE_TIMEOUT,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return pv.SshProbe(error=f"ssh did not finish within {SSH_PROBE_TIMEOUT}s")
    if done.returncode == SSH_ERROR_STATUS:
        error = (done.stderr.strip().splitlines() or ["ssh failed"])[-1]
        return pv.SshProbe(error=error, host_key_mismatch=any(e in done.stderr for e in HOST_KEY_ERRORS))
    marker, disks = pv.parse_probe_output(done.stdout)
    return pv.SshProbe(reachable=True, marker=marker, disks=disks)


# --------------------------------------------------------------------------------------------- common
class Claimed:
    """The cluster's claimed host of the pool, its Lease, and an open BMC connection to it (opened lazily)."""

    def __init__(self, module: Any, store: Any, *, required: bool = True) -> None:
        self.module = module
        self.inputs = Inputs(module.params)
        self.cluster = _cluster(module.params)
        self.store = store
        leases = store.list(self.inputs.namespace, c.pool_selector(self.inputs.pool))
        held = sorted(
            (c.claim_from_lease(o) for o in leases if (o.get("spec") or {}).get("holderIdentity") == self.cluster),
            key=lambda claim: claim.lease,
        )
        self.claim: c.Claim | None = None
        self.host: Host | None = None
        for claim in held:
            host = self.inputs.host(claim.host)
            if host is not None:
                self.claim, self.host = claim, host
                break
        if required and self.claim is None:
            raise ConflictError(
                f"cluster {self.cluster!r} holds no host of pool {self.inputs.pool!r}; claim one first (host_claim)"
            )
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            from .claim_run import RedfishBmc

            if self.host is None:
                raise AssertionError("the BMC client is opened only for a claimed host")
            self._client = RedfishBmc(self.host, self.inputs.api_timeout, self.inputs.refused_login_retries).client
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def generation(self) -> int:
        return self.claim.generation if self.claim else c.FIRST_GENERATION

    @property
    def record(self) -> dict[str, Any]:
        return dict(self.claim.record) if self.claim else {}

    def observe(self, ssh: Mapping[str, Any] | None, prober: Prober) -> pv.Observed:
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.power import (
            normalise_power,
            read_power,
        )

        return pv.Observed(
            power=normalise_power(read_power(self.client)),
            media_image=self.media_image(),
            ssh=prober(ssh, self.record.get("ssh_host_key")) if ssh is not None else None,
        )

    def media_image(self, *, strict: bool = False) -> str | None:
        """The image in the BMC's virtual CD (None when empty, or when the BMC has no virtual media).

        ``strict``: a BMC that does not answer (restarting, busy) raises ``BmcNotReady`` instead of reading as empty,
        for the callers that act on an empty drive."""
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.detect import detect_quirks
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import BmcNotReady
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks import for_name
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.virtual_media import slot_info

        try:
            slots = [slot_info(s) for s in for_name(detect_quirks(self.client)).virtual_media_slots(self.client)]
        except BmcNotReady:
            if strict:
                raise
            return None
        except MetalplaneError:
            return None
        for slot in slots:
            if slot["inserted"] and any(t in ("CD", "DVD") for t in slot["media_types"]):
                return slot["image"] or "(inserted)"
        return None

    def write_record(self, new: Mapping[str, Any]) -> dict[str, Any]:
        """Write ``new`` as the claim's record, guarded by the Lease's resourceVersion; returns the diff."""
        if self.claim is None:
            raise AssertionError("a record is written only with a claim")
        before = dict(self.claim.record)
        current = dict(self.claim.raw)
        for _attempt in range(WRITE_ATTEMPTS):
            meta = dict(current.get("metadata") or {})
            holder = str((current.get("spec") or {}).get("holderIdentity") or "")
            if holder != self.cluster:
                raise ConflictError(f"the claim of host {self.claim.host!r} changed hands to {holder!r}; left alone")
            meta["annotations"] = {**(meta.get("annotations") or {}), c.PROVISIONING_ANNOTATION: pv.record_json(new)}
            body = {**current, "metadata": meta}
            try:
                written = self.store.replace(body)
            except Conflict:
                fresh = self.store.get(self.inputs.namespace, self.claim.lease)
                if fresh is None:
                    raise ConflictError(f"the claim of host {self.claim.host!r} was released meanwhile") from None
                current = fresh
                continue
            self.claim = c.claim_from_lease(written)
            return {"before": {"provisioning": before}, "after": {"provisioning": dict(self.claim.record)}}
        raise ConflictError(f"the Lease of host {self.claim.host!r} kept changing; recording the step gave up")

    def public_host(self) -> dict[str, Any] | None:
        if self.host is None or self.claim is None:
            return None
        return {**self.host.public(), "generation": self.claim.generation, "lease": self.claim.lease}


def _with_claimed(
    module: Any, store_factory: Any, action: Callable[[Claimed], dict[str, Any]], *, required: bool
) -> dict[str, Any]:
    if store_factory is None:
        require_sushy(module)
    Inputs(module.params)  # every input is checked before the first request
    _cluster(module.params)
    with opened_store(module, store_factory) as store:
        claimed = Claimed(module, store, required=required)
        try:
            result = action(claimed)
        finally:
            claimed.close()
    if "diff" in result and not module.diff_mode:
        result.pop("diff")
    return result


def _ssh_params(params: Mapping[str, Any]) -> dict[str, Any] | None:
    ssh = {k: v for k, v in (params.get("ssh") or {}).items() if v not in (None, "")}
    return ssh or None


# --------------------------------------------------------------------------------------------- info
def virtual_cd_fix_needed(client: Any) -> bool:
    """iDRAC8 only: the virtual optical drive is in the persistent order but behind the disk.

    On 13G the one-time boot of the virtual CD (an SCP import) can lose to an OS already on the disk, so the
    reference deployment moves ``Optical.iDRACVirtual.1-1`` ahead of the disk (BootSources plus a BIOS job, which
    the Lifecycle Controller applies in a POST of its own at the install's power-on). Once there it stays until the
    teardown restores the recorded order, so a host whose order is already right POSTs only twice. Elsewhere the
    one-time ``Cd`` boot wins.
    """
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.boot import entry_kind
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.detect import detect_quirks
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks import for_name

    quirks = for_name(detect_quirks(client))
    if quirks.name != "dell_idrac8":
        return False
    try:
        state = quirks.read_boot_order(client)
    except MetalplaneError:
        return False
    kinds = [entry_kind(ident) for ident in state.order]
    if "virtual_cd" not in kinds:
        return False
    disk = kinds.index("hdd") if "hdd" in kinds else len(kinds)
    return kinds.index("virtual_cd") > disk


def run_host_provision_info(
    module: Any, *, store_factory: Any = None, prober: Prober | None = None, clock: Any = time.monotonic
) -> dict[str, Any]:
    params = module.params
    state = params.get("state") or "present"
    ssh = _ssh_params(params)
    probe = prober or ssh_probe

    def act(claimed: Claimed) -> dict[str, Any]:
        if claimed.claim is None and state == "present":
            if not module.check_mode:
                raise ConflictError(
                    f"cluster {claimed.cluster!r} holds no host of pool {claimed.inputs.pool!r}; claim one first"
                    " (host_claim)"
                )
            # A dry run before the claim exists: the plan of a fresh install (the claim is planned, not made).
            steps = pv.install_steps(virtual_cd_fix=False, disk_first=bool(params.get("disk_first")))
            plan = pv.Plan("unclaimed", steps, "the host is not claimed yet (check mode); the boot order is read after")
            return {"changed": False, "host": None, "plan": plan.as_dict(), "steps": plan.steps, "status": plan.status}
        if claimed.claim is None:  # absent, and nothing held: nothing to tear down
            plan = pv.Plan("released", [pv.STEP_DELETE_ISO], f"cluster {claimed.cluster!r} holds no host of the pool")
            return {"changed": False, "host": None, "plan": plan.as_dict(), "steps": plan.steps, "status": plan.status}
        if state == "absent":
            observed = claimed.observe(ssh, probe)
            reachable = observed.ssh is not None and observed.ssh.reachable
            if params.get("wait_provisioned") and not reachable and not module.check_mode:
                observed, _plan = _wait_provisioned(claimed, ssh, probe, int(params.get("wait_timeout") or 0), clock)
            plan, wipe = pv.plan_absent(claimed.record, observed, cluster=claimed.cluster)
            return _info_result(claimed, plan, observed, wipe=wipe)
        facts = _inventory(claimed)
        observed = claimed.observe(ssh, probe)
        plan = pv.plan_present(
            claimed.record,
            observed,
            cluster=claimed.cluster,
            generation=claimed.generation,
            virtual_cd_fix=virtual_cd_fix_needed(claimed.client),
            disk_first=bool(params.get("disk_first")),
        )
        problems = pv.inventory_problems(facts, claimed.host.root_disk if claimed.host else {})
        if problems and plan.status == "new":
            raise ConflictError(
                f"host {claimed.host.name if claimed.host else '?'} cannot be installed: " + "; ".join(problems),
                details={"problems": problems},
            )
        for problem in problems:
            module.warn(f"host {claimed.host.name if claimed.host else '?'}: {problem}")
        if params.get("wait_provisioned") and plan.status != "provisioned" and not module.check_mode:
            observed, plan = _wait_provisioned(claimed, ssh, probe, int(params.get("wait_timeout") or 0), clock)
        return _info_result(claimed, plan, observed, inventory={**facts, "problems": problems})

    return _with_claimed(module, store_factory, act, required=False)


def _inventory(claimed: Claimed) -> dict[str, Any]:
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.info import gather

    facts = gather(claimed.client)
    return {
        "vendor": facts.get("vendor"),
        "model": facts.get("system_model"),
        "bmc_model": facts.get("model"),
        "generation": facts.get("generation"),
        "quirks": facts.get("quirks"),
        "gpus": [g.get("model") or g.get("name") for g in facts.get("gpus") or []],
        "memory_gib": facts.get("memory_gib"),
        "storage": facts.get("storage") or [],
        "boot_mode": (facts.get("boot") or {}).get("bios_boot_mode") or (facts.get("boot") or {}).get("override_mode"),
        "virtual_media_available": facts.get("virtual_media_available"),
    }


def _wait_provisioned(
    claimed: Claimed, ssh: Mapping[str, Any] | None, prober: Prober, timeout: int, clock: Any
) -> tuple[pv.Observed, pv.Plan]:
    seen: dict[str, Any] = {}

    def observe() -> Poll[dict[str, Any]]:
        observed = claimed.observe(ssh, prober)
        plan = pv.plan_present(
            claimed.record, observed, cluster=claimed.cluster, generation=claimed.generation, virtual_cd_fix=False
        )
        seen.update(observed=observed, plan=plan)
        last = {
            "power": observed.power,
            "media": observed.media_image,
            "ssh": (observed.ssh or pv.SshProbe()).as_dict(),
        }
        return Poll(plan.status == "provisioned", last)

    try:
        wait_for(
            observe, timeout=timeout, what="the node to answer SSH with its marker", backoff=WAIT_BACKOFF, clock=clock
        )
    except WaitTimeout as exc:
        raise WaitTimeout(
            f"The node did not answer SSH with the pinned host key and this claim's marker (generation"
            f" {claimed.generation}) within {timeout}s; last seen: {exc.last_seen}",
            last_seen=exc.last_seen,
        ) from None
    return seen["observed"], seen["plan"]


def _info_result(
    claimed: Claimed,
    plan: pv.Plan,
    observed: pv.Observed,
    *,
    wipe: dict[str, Any] | None = None,
    inventory: dict[str, Any] | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "changed": False,
        "host": claimed.public_host(),
        "generation": claimed.generation,
        "record": claimed.record,
        "status": plan.status,
        "steps": plan.steps,
        "plan": plan.as_dict(),
        "power_state": observed.power,
        "media_image": observed.media_image,
        "ssh": observed.ssh.as_dict() if observed.ssh else None,
    }
    if wipe is not None:
        result["wipe"] = wipe
    if inventory is not None:
        result["inventory"] = inventory
    return result


# --------------------------------------------------------------------------------------------- steps
def run_host_provision(module: Any, *, store_factory: Any = None, clock: Any = time.monotonic) -> dict[str, Any]:
    params = module.params
    step = params.get("step")
    if step not in STEPS:
        raise InputError("step", f"{step!r} is not one of {', '.join(STEPS)}")
    timeout = int(params.get("wait_timeout") or 0)
    _media_url(params)  # checked before the first request
    retries = params.get("media_retries")
    if retries is not None and not 0 <= int(retries) <= MAX_MEDIA_RETRIES:
        raise InputError("media_retries", f"{retries} is not between 0 and {MAX_MEDIA_RETRIES}")

    def act(claimed: Claimed) -> dict[str, Any]:  # noqa: PLR0911 - one return per step
        if claimed.claim is None:
            if not module.check_mode:
                raise ConflictError(
                    f"cluster {claimed.cluster!r} holds no host of pool {claimed.inputs.pool!r}; claim one first"
                    " (host_claim)"
                )
            return {"changed": step != "wait_installed", "msg": f"would run step {step} once the host is claimed"}
        generation = claimed.generation
        record = claimed.record
        phase = pv.phase_of(record, generation)
        if claimed.host is None:
            raise AssertionError("a step runs only on a claimed host")
        if step == "prepare":
            if not claimed.host.root_disk:
                raise InputError(
                    f"hosts[{claimed.host.name}].root_disk",
                    "the install disk is not known: set root_disk ({wwn: ...} or {serial: ...}) on the pool host",
                )
            if phase in (pv.INSTALLING, pv.INSTALLED):
                return _step_result(claimed, False, f"generation {generation} is already {phase}")
            order = None if record.get("boot_order") else _boot_order(claimed.client)
            new = pv.updated_record(
                record, generation, phase=pv.PREPARING, root_disk=claimed.host.root_disk, boot_order=order
            )
            return _write(module, claimed, new, "recorded the install disk and the boot order")
        if step == "install":
            return _install(module, claimed, phase, timeout)
        if step == "wait_installed":
            return _wait_installed(module, claimed, phase, timeout, clock)
        if step == "recover":
            return _recover(module, claimed, phase, timeout)
        target = pv.INSTALLED if step == "installed" else pv.WIPED
        if phase == target:
            return _step_result(claimed, False, f"generation {generation} is already {target}")
        return _write(module, claimed, pv.updated_record(record, generation, phase=target, since=c.now_micro()), target)

    return _with_claimed(module, store_factory, act, required=False)


def _boot_order(client: Any) -> list[str] | None:
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.detect import detect_quirks
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks import for_name

    try:
        return list(for_name(detect_quirks(client)).read_boot_order(client).order)
    except MetalplaneError:
        return None  # a BMC without a readable persistent order: nothing to restore later


def _write(module: Any, claimed: Claimed, new: dict[str, Any], what: str) -> dict[str, Any]:
    if dict(new) == claimed.record:
        return _step_result(claimed, False, "already recorded")
    if module.check_mode:
        result = _step_result(claimed, True, f"would have {what}")
        result["diff"] = {"before": {"provisioning": claimed.record}, "after": {"provisioning": new}}
        return result
    diff = claimed.write_record(new)
    return {**_step_result(claimed, True, what), "diff": diff}


def _step_result(claimed: Claimed, changed: bool, msg: str) -> dict[str, Any]:
    return {"changed": changed, "msg": msg, "record": claimed.record, "generation": claimed.generation}


def _install(module: Any, claimed: Claimed, phase: str | None, timeout: int) -> dict[str, Any]:
    """Record ``installing`` and power the server on for it, in one call: a later run sees both or neither."""
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish import power

    if phase in (pv.INSTALLING, pv.INSTALLED):
        return _step_result(claimed, False, f"the install of generation {claimed.generation} was started already")
    host_key = str(module.params.get("ssh_host_key") or "").strip()
    if not host_key.startswith("ssh-"):
        raise InputError("ssh_host_key", "give the install's SSH host public key (boot_iso's ssh_host_public_key)")
    before = dict(claimed.record)
    new = pv.updated_record(before, claimed.generation, phase=pv.INSTALLING, ssh_host_key=host_key, since=c.now_micro())
    if module.check_mode:
        result = _step_result(claimed, True, "would record the install and power the server on")
        result["diff"] = {"before": {"provisioning": before}, "after": {"provisioning": new}}
        return result
    client = claimed.client
    # The BMC may have dropped the ISO since the insert (an iDRAC reset ejects its virtual media): powered on now,
    # the server would boot whatever comes next, and the wait would see that only at its deadline.
    reinserted = None
    if claimed.media_image(strict=True) is None:
        url = _media_url(module.params)
        if url is None:
            raise ConflictError(
                "the virtual CD is empty although the installer ISO was inserted for this install (a BMC reset ejects"
                " it): insert it again (give media_url to put it back by itself); nothing was powered on"
            )
        reinserted = _insert_again(claimed, url)
    plan = power.plan_power("on", power.read_power(client), power.allowed_resets(client.system))
    diff = claimed.write_record(new)
    try:
        sent, final = power.execute(client, plan, timeout)
    except MetalplaneError:
        # The server did not power on: take the record back, so the next run does not take the untouched
        # installer media for a finished install.
        claimed.write_record(pv.updated_record(before, claimed.generation, phase=pv.PREPARING))
        raise
    result = {**_step_result(claimed, True, "recorded the install and powered the server on"), "diff": diff,
              "actions": sent, "power_state": final}  # fmt: skip
    if reinserted is not None:
        module.warn(
            f"host {claimed.host.name if claimed.host else '?'}: the BMC had dropped the installer ISO after its insert"
            " (a BMC reset does that); inserted it again before the power-on"
        )
        result.update(recovered_by=RECOVERED_BY_MEDIA, media_recovery=[reinserted])
    return result


def _wait_installed(module: Any, claimed: Claimed, phase: str | None, timeout: int, clock: Any) -> dict[str, Any]:
    """Wait for the installer's final power-off; on the deadline, say what the BMC showed last.

    A server on with its virtual CD empty has an installer that lost its media (a BMC reset ejects it; the installer
    then stops at an error screen and never powers off): the ISO goes back in, the one-time boot is set again and
    the server restarts into the installer, at most ``media_retries`` times, each with a fresh deadline. The
    generation's disk belongs to this install, so starting it over loses nothing."""
    if module.check_mode:
        return _step_result(claimed, False, "would wait for the installer to power the server off")
    if phase != pv.INSTALLING:
        raise ConflictError(
            f"no install of generation {claimed.generation} was started (recorded phase: {phase or 'none'});"
            " run the install step first"
        )
    retries = int(module.params.get("media_retries") or 0)
    url = _media_url(module.params) or _url_or_none(claimed.media_image())
    recoveries: list[dict[str, Any]] = []
    while True:
        off_polls = OFF_POLLS_AFTER_RESTART if recoveries else 1
        seen = _wait_power_off_or_stranded(claimed, timeout, clock, off_polls=off_polls)
        if seen["power"] == "Off":
            break
        if len(recoveries) >= retries or url is None:
            why = (
                f"it was put back {len(recoveries)} time(s) already (media_retries)"
                if url
                else "its URL is not known here (give media_url)"
            )
            raise ConflictError(
                f"The installer lost its media: the server is on and its virtual CD is empty (a BMC reset ejects it),"
                f" so the installer waits at an error screen and never powers off; {why}. Look at the BMC's log for"
                " the resets, then run again: the next run starts this generation's install over."
            )
        module.warn(
            f"host {claimed.host.name if claimed.host else '?'}: the installer lost its media after"
            f" {seen['seconds']}s (the BMC dropped the ISO, as a BMC reset does); inserted it again and restarted the"
            " server into the installer"
        )
        recoveries.append(
            {**_insert_again(claimed, url), "restart": _restart(claimed, min(timeout, RESTART_POWER_TIMEOUT))}
        )
    result = {**_step_result(claimed, False, "the installer powered the server off"), "seen": seen}
    if recoveries:
        result.update(recovered_by=RECOVERED_BY_MEDIA, media_recovery=recoveries)
    return result


def _wait_power_off_or_stranded(
    claimed: Claimed, timeout: int, clock: Any, *, off_polls: int, sleep: Callable[[float], None] = time.sleep
) -> dict[str, Any]:
    """Poll until the server is off for ``off_polls`` polls in a row, or on with its virtual CD empty for
    ``MEDIA_GONE_POLLS``; a BMC that does not answer for a while (a reset takes it down for a minute) is polled
    again, not a failure."""
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import BmcNotReady
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.power import normalise_power, read_power

    started = clock()
    in_a_row = {"Off": 0, "empty": 0}

    def observe() -> Poll[dict[str, Any]]:
        seconds = round(clock() - started)
        try:
            value = normalise_power(read_power(claimed.client))
            media = claimed.media_image(strict=True) if value == "On" else None
        except BmcNotReady as exc:
            in_a_row.update(Off=0, empty=0)
            return Poll(False, {"power": "unknown", "bmc": exc.msg[:200], "seconds": seconds})
        in_a_row["Off"] = in_a_row["Off"] + 1 if value == "Off" else 0
        in_a_row["empty"] = in_a_row["empty"] + 1 if value == "On" and media is None else 0
        done = in_a_row["Off"] >= off_polls or in_a_row["empty"] >= MEDIA_GONE_POLLS
        return Poll(done, {"power": value, "media": media, "seconds": seconds})

    try:
        return wait_for(
            observe,
            timeout=timeout,
            what="the installer to power the server off",
            backoff=WAIT_BACKOFF,
            clock=clock,
            sleep=sleep,
        )
    except WaitTimeout as exc:
        raise WaitTimeout(
            f"The install did not finish within {timeout}s (the installer powers the server off at its end); last"
            f" seen: {exc.last_seen}. Look at the server's console (the BMC's virtual console) for a prompt or an"
            " error, or raise baremetal_host_install_timeout if the install is only slow.",
            last_seen=exc.last_seen,
        ) from None


def _media_url(params: Mapping[str, Any]) -> str | None:
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.virtual_media import (
        validate_image_url,
    )

    url = params.get("media_url")
    if not url:
        return None
    try:
        return validate_image_url(url)
    except InputError:
        raise InputError(
            "media_url", f"{url!r} must be the http:// or https:// URL the ISO was inserted from"
        ) from None


def _url_or_none(image: str | None) -> str | None:
    return image if image and image.startswith(("http://", "https://")) else None


def _insert_again(claimed: Claimed, url: str) -> dict[str, Any]:
    """Put the installer ISO back in the virtual CD (with the virtual media module's recovery ladder) and set the
    one-time boot from it again: what the role's insert and boot tasks did before the BMC dropped it."""
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.detect import detect_quirks
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks import for_name
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.virtual_media import Media, pick_slot

    client = claimed.client
    quirks = for_name(detect_quirks(client))
    media = Media(client, quirks)
    slot = pick_slot(media.infos(), None, "cd")
    ladder = media.insert(slot["id"], url)
    boot = quirks.set_one_time_boot(client, "virtual_cd", False)
    return {"slot": slot["id"], "media_steps": list(media.steps), "insert_recovered_by": ladder, "boot_once": boot}


def _restart(claimed: Claimed, timeout: float) -> list[str]:
    """Restart the server into the installer; returns the resets sent. Only a ForceOff-then-On restart is waited on
    in between; the end of the restart is the installer's business (the caller waits for its power-off)."""
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish import power

    client = claimed.client
    plan = power.plan_power("restarted", power.read_power(client), power.allowed_resets(client.system))
    for index, reset in enumerate(plan.resets):
        client.call(f"Power action {reset}", client.system.reset_system, power.sushy.ResetType(reset))
        if reset == "ForceOff" and index < len(plan.resets) - 1:
            power.wait_power(client, "Off", timeout)
    return list(plan.resets)


def _recover(module: Any, claimed: Claimed, phase: str | None, timeout: int) -> dict[str, Any]:
    """Power on a host installed for this generation that was found off (a power cut, the power button):
    never an install, and reported as a recovery (``recovered_by``) on the run's timeline."""
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish import power

    if phase != pv.INSTALLED:
        raise ConflictError(
            f"host {claimed.claim.host if claimed.claim else '?'} is not recorded as installed for generation"
            f" {claimed.generation} (phase: {phase or 'none'}); a recovery only powers on an installed host"
        )
    client = claimed.client
    plan = power.plan_power("on", power.read_power(client), power.allowed_resets(client.system))
    if not plan.changed:
        return {**_step_result(claimed, False, "the host is powered on"), "recovered_by": "none"}
    if module.check_mode:
        return {**_step_result(claimed, True, "would power the installed host on"), "recovered_by": "none"}
    sent, final = power.execute(client, plan, timeout)
    module.warn(
        f"host {claimed.claim.host if claimed.claim else '?'} is installed for generation {claimed.generation} but"
        " was powered off (a power cut, or its power button): powered it on again, without reinstalling"
    )
    return {**_step_result(claimed, True, "powered the installed host on again"), "recovered_by":
            RECOVERED_BY_POWER_ON, "actions": sent, "power_state": final}  # fmt: skip
