# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run at a time per cluster: a renewed Lease on the Modelplane control plane.

Why: a scheduled reconcile (AWX/AAP) that overlaps a manual run would otherwise converge the same cluster twice at
once: both list, both create (a duplicate VKE cluster), both install the same Helm release, both drive the same BMC.
The lock lives where every controller of the inventory already connects, the control plane the host claims live on,
as a ``coordination.k8s.io/v1`` Lease per cluster, the primitive Kubernetes' own leader election uses.

It is a different object from a host claim on purpose. A claim must survive a killed run (the host stays the
cluster's); this lock must not. It expires unless its holder renews it: a small process forked from the module
renews it every third of ``leaseDurationSeconds`` while the ``ansible-playbook`` that took it lives, and deletes it
when that process is gone, so a run that ends, fails or is killed frees its clusters within a second or two. A
controller that dies with its renewer (power cut, pod evicted) stops renewing, and a waiting run takes the lock once
it has seen the same ``resourceVersion`` for a whole lease duration (observed on its own clock, as client-go's
leader election does, so clock skew between controllers cannot shorten it). A run on the same machine as a holder
that is gone takes it at once.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    ConflictError,
    WaitTimeout,
)
from ansible_collections.metalplane.inference.plugins.module_utils._kube.object_store import Conflict

LEASE_API = "coordination.k8s.io/v1"
LEASE_KIND = "Lease"
# The Lease of cluster C is "metalplane-run.C": C is a DNS-1123 label, so the name is a valid object name.
LEASE_PREFIX = "metalplane-run."
OWNER_LABEL = "app.kubernetes.io/managed-by"
OWNER_VALUE = "metalplane.inference"
PURPOSE_LABEL = "metalplane.inference/lease"
PURPOSE_VALUE = "run-lock"
# Who holds it, in enough detail to decide "that run is gone" on the same machine and to tell a person whom to ask.
ANNOTATION_PREFIX = "run.metalplane.inference/"
IDENTITY_FIELDS = ("host", "boot_id", "pid_namespace", "pid", "started", "user")
# Seconds between two looks at a held lock while waiting for it.
POLL_SECONDS = 2.0
# Seconds between two liveness checks of the playbook by the renewer (the release after a run's end waits this).
LIVENESS_SECONDS = 1.0
PLAYBOOK_COMMANDS = ("ansible-playbook",)
ANSIBLE_COMMANDS = ("ansible-playbook", "ansible", "ansible-console", "ansible-pull")

Clock = Callable[[], float]
Sleep = Callable[[float], None]


def lease_name(cluster: str) -> str:
    return LEASE_PREFIX + cluster


def micro_time(epoch: float) -> str:
    """An epoch time as a Kubernetes MicroTime (RFC 3339, microseconds, UTC), the type of ``renewTime``."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class RunIdentity:
    """One ``ansible-playbook`` process on one machine: who holds a lock."""

    host: str
    boot_id: str
    pid_namespace: str
    pid: int
    started: str  # the process's start time in clock ticks since boot: a reused PID has another
    user: str

    @property
    def holder(self) -> str:
        """``spec.holderIdentity``: readable, and unique per process on a machine."""
        return f"{self.user}@{self.host} pid {self.pid}"

    def annotations(self) -> dict[str, str]:
        return {ANNOTATION_PREFIX + name: str(getattr(self, name)) for name in IDENTITY_FIELDS}

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, Any]) -> RunIdentity | None:
        values = {name: annotations.get(ANNOTATION_PREFIX + name) for name in IDENTITY_FIELDS}
        if any(v is None for v in values.values()):
            return None
        try:
            pid = int(str(values["pid"]))
        except ValueError:
            return None
        return cls(**{**{k: str(v) for k, v in values.items()}, "pid": pid})

    def same_machine(self, other: RunIdentity) -> bool:
        """Whether ``other``'s PID means a process this machine can look up (same boot, same PID namespace)."""
        known = self.boot_id and self.pid_namespace
        return bool(known) and (self.host, self.boot_id, self.pid_namespace) == (
            other.host,
            other.boot_id,
            other.pid_namespace,
        )


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def process_start(pid: int, proc: Path = Path("/proc")) -> str:
    """Field 22 of ``/proc/PID/stat`` (start time in ticks), or "" when the process does not exist."""
    stat = _read(proc / str(pid) / "stat")
    if not stat:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": field 3 onwards
    return fields[19] if len(fields) > 19 else ""


def process_alive(identity: RunIdentity, proc: Path = Path("/proc")) -> bool:
    """Whether the process ``identity`` names still runs (the same one: its start time matches)."""
    if identity.started:
        return process_start(identity.pid, proc) == identity.started
    try:
        os.kill(identity.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _parent(pid: int, proc: Path) -> int:
    stat = _read(proc / str(pid) / "stat")
    fields = stat[stat.rfind(")") + 2 :].split() if stat else []
    return int(fields[1]) if len(fields) > 1 else 0


def _command(pid: int, proc: Path) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [os.path.basename(part) for part in raw.decode(errors="replace").split("\0")[:2] if part]


def playbook_pid(proc: Path = Path("/proc"), start: int | None = None) -> int | None:
    """The outermost ``ansible-playbook`` (else ``ansible``) process above this one, or None without ``/proc``.

    Outermost: ansible-playbook forks a worker per task with the same command line; the worker ends with the task,
    the run with the outermost one.
    """
    found: dict[str, int] = {}
    pid = os.getppid() if start is None else start
    seen = 0
    while pid > 1 and seen < 64:
        command = _command(pid, proc)
        for name in ANSIBLE_COMMANDS:
            if name in command:
                found[name] = pid
        pid = _parent(pid, proc)
        seen += 1
    for name in ANSIBLE_COMMANDS:
        if name in found:
            return found[name]
    return None


def this_run(proc: Path = Path("/proc")) -> tuple[RunIdentity, bool]:
    """The identity of the run this module belongs to, and whether its playbook process was found."""
    pid = playbook_pid(proc)
    namespace = ""
    try:
        namespace = os.readlink(proc / "self" / "ns" / "pid")
    except OSError:
        namespace = ""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    identity = RunIdentity(
        host=socket.gethostname(),
        boot_id=_read(proc / "sys" / "kernel" / "random" / "boot_id"),
        pid_namespace=namespace,
        pid=pid if pid is not None else os.getppid(),
        started=process_start(pid, proc) if pid is not None else "",
        user=user,
    )
    return identity, pid is not None


def lease_body(namespace: str, cluster: str, me: RunIdentity, seconds: int, now: float) -> dict[str, Any]:
    return {
        "apiVersion": LEASE_API,
        "kind": LEASE_KIND,
        "metadata": {
            "name": lease_name(cluster),
            "namespace": namespace,
            "labels": {OWNER_LABEL: OWNER_VALUE, PURPOSE_LABEL: PURPOSE_VALUE},
            "annotations": me.annotations(),
        },
        "spec": {
            "holderIdentity": me.holder,
            "leaseDurationSeconds": seconds,
            "acquireTime": micro_time(now),
            "renewTime": micro_time(now),
        },
    }


def holder_of(lease: Mapping[str, Any]) -> RunIdentity | None:
    return RunIdentity.from_annotations((lease.get("metadata") or {}).get("annotations") or {})


def held_by(lease: Mapping[str, Any] | None, me: RunIdentity) -> bool:
    return lease is not None and holder_of(lease) == me and bool((lease.get("spec") or {}).get("holderIdentity"))


def describe(lease: Mapping[str, Any]) -> dict[str, Any]:
    """What a result or an error shows of a lock (no secret in it)."""
    spec = lease.get("spec") or {}
    return {
        "holder": spec.get("holderIdentity"),
        "acquired": spec.get("acquireTime"),
        "renewed": spec.get("renewTime"),
        "lease_seconds": spec.get("leaseDurationSeconds"),
    }


@dataclass
class LockRequest:
    namespace: str
    cluster: str
    me: RunIdentity
    lease_seconds: int
    wait_timeout: int


def _take(store: Any, request: LockRequest, current: Mapping[str, Any] | None, clock: Clock) -> dict[str, Any]:
    body = lease_body(request.namespace, request.cluster, request.me, request.lease_seconds, clock())
    if current is None:
        return store.create(body)
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    if held_by(current, request.me):
        body["spec"]["acquireTime"] = current["spec"].get("acquireTime") or body["spec"]["acquireTime"]
    return store.replace(body)


def stale_reason(
    lease: Mapping[str, Any],
    me: RunIdentity,
    first_seen: float,
    now: float,
    alive: Callable[[RunIdentity], bool] = process_alive,
) -> str | None:
    """Why a lock another holder has may be taken now, or None while it must be waited for."""
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return "it was released"
    holder = holder_of(lease)
    if holder is not None and me.same_machine(holder) and not alive(holder):
        return f"its run ({spec['holderIdentity']}) has ended on this machine"
    seconds = int(spec.get("leaseDurationSeconds") or 0)
    if now - first_seen >= seconds:
        return f"{spec['holderIdentity']} has not renewed it for {seconds} s"
    return None


def acquire(
    store: Any,
    request: LockRequest,
    *,
    check_mode: bool = False,
    clock: Clock = time.time,
    monotonic: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    alive: Callable[[RunIdentity], bool] = process_alive,
) -> dict[str, Any]:
    """Take (or keep) the lock of ``request.cluster``, waiting up to ``wait_timeout`` s for another run's to go."""
    name = lease_name(request.cluster)
    started = monotonic()
    observed: dict[str, float] = {}  # resourceVersion -> when this run first saw it
    waited_for: str | None = None
    while True:
        lease = store.get(LEASE_API, LEASE_KIND, request.namespace, name)
        refuse_foreign(lease, request.namespace, request.cluster)
        mine = held_by(lease, request.me)
        reason = None
        if lease is not None and not mine:
            version = lease["metadata"]["resourceVersion"]
            reason = stale_reason(lease, request.me, observed.setdefault(version, monotonic()), monotonic(), alive)
            if reason is None:
                waited_for = (lease.get("spec") or {}).get("holderIdentity")
                if check_mode:
                    return {"changed": False, "acquired": False, "would_wait_for": describe(lease)}
                if monotonic() - started >= request.wait_timeout:
                    raise WaitTimeout(
                        f"Cluster {request.cluster} is being converged by another run ({waited_for}, lock"
                        f" {request.namespace}/{name}); waited {request.wait_timeout} s. Let that run finish, or"
                        " raise run_lock_wait; a run that was killed frees it within leaseDurationSeconds",
                        last_seen=describe(lease),
                    )
                sleep(POLL_SECONDS)
                continue
        if check_mode:
            return {"changed": not mine, "acquired": False, "took_over": reason}
        try:
            taken = _take(store, request, lease, clock)
        except Conflict:
            continue  # another run moved first: look again
        return {
            "changed": not mine,
            "acquired": True,
            "took_over": reason,
            "waited_for": waited_for,
            "waited_seconds": round(monotonic() - started, 1),
            "lock": {"namespace": request.namespace, "name": name, **describe(taken)},
            "resource_version": taken["metadata"]["resourceVersion"],
        }


def release(store: Any, namespace: str, cluster: str, me: RunIdentity, *, check_mode: bool = False) -> bool:
    """Delete the lock when this run holds it; a lock another run holds is left alone. True when it was deleted."""
    lease = store.get(LEASE_API, LEASE_KIND, namespace, lease_name(cluster))
    if not held_by(lease, me):
        return False
    if check_mode:
        return True
    meta = lease["metadata"]
    try:
        return bool(
            store.delete(
                LEASE_API,
                LEASE_KIND,
                namespace,
                meta["name"],
                {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
            )
        )
    except Conflict:
        return release(store, namespace, cluster, me)


def renew_while_alive(
    store: Any,
    requests: Sequence[LockRequest],
    *,
    alive: Callable[[], bool],
    clock: Clock = time.time,
    monotonic: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
) -> str:
    """Renew the locks every third of their duration while ``alive()``; release them when not. Returns why it stopped.

    One renewer holds every lock of a run (a run of 40 clusters keeps one process, not 40). A lock another run
    holds now (released, or taken after the control plane was unreachable for a whole lease) is dropped; the
    renewer stops when it holds none."""
    held = list(requests)
    every = {r.cluster: max(r.lease_seconds / 3.0, LIVENESS_SECONDS) for r in held}
    last_renewed = dict.fromkeys(every, monotonic())
    lost: list[str] = []
    while True:
        if not alive():
            failed = []
            for request in held:
                try:
                    release(store, request.namespace, request.cluster, request.me)
                except ApiError:
                    failed.append(request.cluster)
            if failed:
                return f"the run ended; the release failed for {', '.join(failed)}, the lock expires"
            return "the run ended"
        for request in list(held):
            if monotonic() - last_renewed[request.cluster] < every[request.cluster]:
                continue
            try:
                lease = store.get(LEASE_API, LEASE_KIND, request.namespace, lease_name(request.cluster))
                if not held_by(lease, request.me):
                    held.remove(request)
                    lost.append("the lock was released or taken")
                    continue
                _take(store, request, lease, clock)
                last_renewed[request.cluster] = monotonic()
            except Conflict:
                continue
            except ApiError:
                if monotonic() - last_renewed[request.cluster] >= request.lease_seconds:
                    held.remove(request)
                    lost.append("the control plane did not answer for a whole lease duration")
        if not held:
            return lost[-1] if lost else "no lock to renew"
        sleep(LIVENESS_SECONDS)


def refuse_foreign(lease: Mapping[str, Any] | None, namespace: str, cluster: str) -> None:
    """A Lease of our name that this collection did not write is never taken or deleted."""
    if lease is None:
        return
    labels = (lease.get("metadata") or {}).get("labels") or {}
    if labels.get(PURPOSE_LABEL) != PURPOSE_VALUE:
        raise ConflictError(
            f"Lease {namespace}/{lease_name(cluster)} exists but is not a run lock of this collection (label"
            f" {PURPOSE_LABEL}={PURPOSE_VALUE} missing); rename or delete it"
        )
