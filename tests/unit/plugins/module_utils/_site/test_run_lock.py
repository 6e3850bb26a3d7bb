"""The run lock's decisions against an in-memory API server: who takes it, who waits, who gives up, and when.

The store below has the API server's semantics where the lock relies on them: a create of an existing name and a
replace or delete with a stale ``resourceVersion``/``uid`` raise ``Conflict``; every write bumps the version. Time is
a fake clock that only ``sleep`` advances, so the waits are exact and instant.
"""

from __future__ import annotations

import copy
import itertools
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from time import monotonic, sleep
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ConflictError,
    InputError,
    WaitTimeout,
)
from ansible_collections.metalplane.inference.plugins.module_utils._kube.object_store import Conflict
from ansible_collections.metalplane.inference.plugins.module_utils._site import run_lock as rl

NS = "modelplane-system"
NAME = "metalplane-run.gpu-1"
ME = rl.RunIdentity("ctl-a", "boot-a", "pid:[1]", 100, "5000", "ops")
SAME_MACHINE_OTHER = rl.RunIdentity("ctl-a", "boot-a", "pid:[1]", 200, "6000", "ops")
OTHER_MACHINE = rl.RunIdentity("ctl-b", "boot-b", "pid:[1]", 100, "5000", "awx")


class MemoryObjectStore:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.writes: list[str] = []
        self._versions = itertools.count(1)
        self.before_write: Callable[[str], None] | None = None

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        assert (api_version, kind, namespace) == (rl.LEASE_API, rl.LEASE_KIND, NS)
        found = self.objects.get(name)
        return copy.deepcopy(found) if found else None

    def _stamp(self, body: Mapping[str, Any], uid: str) -> dict[str, Any]:
        obj = copy.deepcopy(dict(body))
        obj["metadata"].update(resourceVersion=str(next(self._versions)), uid=uid)
        self.objects[obj["metadata"]["name"]] = obj
        return copy.deepcopy(obj)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.before_write:
            self.before_write("create")
        self.writes.append("create")
        if body["metadata"]["name"] in self.objects:
            raise Conflict("exists", status=409)
        return self._stamp(body, f"uid-{len(self.writes)}")

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.before_write:
            self.before_write("replace")
        self.writes.append("replace")
        current = self.objects.get(body["metadata"]["name"])
        if current is None or current["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion"):
            raise Conflict("changed", status=409)
        return self._stamp(body, current["metadata"]["uid"])

    def delete(self, api_version: str, kind: str, namespace: str, name: str, preconditions: Any = None) -> bool:
        self.writes.append("delete")
        current = self.objects.get(name)
        if current is None:
            return False
        if preconditions and any(current["metadata"][k] != v for k, v in preconditions.items()):
            raise Conflict("changed", status=409)
        del self.objects[name]
        return True

    def seed(self, holder: rl.RunIdentity | None, *, seconds: int = 60, labelled: bool = True) -> dict[str, Any]:
        body = rl.lease_body(NS, "gpu-1", holder or ME, seconds, 1000.0)
        if holder is None:
            body["spec"]["holderIdentity"] = None
        if not labelled:
            body["metadata"]["labels"] = {}
        return self._stamp(body, "uid-seed")


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.on_sleep: Callable[[float], None] | None = None

    def clock(self) -> float:
        return 2_000_000_000.0 + self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep:
            self.on_sleep(self.now)


def acquire(store: MemoryObjectStore, fake: FakeTime, *, wait: int = 600, alive: bool = True, **kw: Any) -> dict:
    request = rl.LockRequest(NS, "gpu-1", ME, 60, wait)
    return rl.acquire(
        store,
        request,
        clock=fake.clock,
        monotonic=fake.monotonic,
        sleep=fake.sleep,
        alive=lambda _identity: alive,
        **kw,
    )


def test_a_free_cluster_is_taken_with_one_create() -> None:
    store, fake = MemoryObjectStore(), FakeTime()
    result = acquire(store, fake)
    assert (result["changed"], result["acquired"], result["took_over"], store.writes) == (True, True, None, ["create"])
    lease = store.objects[NAME]
    assert lease["spec"]["holderIdentity"] == "ops@ctl-a pid 100"
    assert lease["spec"]["leaseDurationSeconds"] == 60
    assert rl.holder_of(lease) == ME
    assert lease["metadata"]["labels"][rl.PURPOSE_LABEL] == rl.PURPOSE_VALUE


def test_the_holders_own_lock_is_renewed_and_keeps_its_acquire_time() -> None:
    store, fake = MemoryObjectStore(), FakeTime()
    store.seed(ME)
    acquired = store.objects[NAME]["spec"]["acquireTime"]
    result = acquire(store, fake)
    assert (result["changed"], store.writes) == (False, ["replace"])
    assert store.objects[NAME]["spec"]["acquireTime"] == acquired
    assert store.objects[NAME]["spec"]["renewTime"] != acquired


# (case, holder, alive, seconds waited before it is taken, why)
TAKEN = [
    ("released", None, True, 0, "it was released"),
    ("gone on this machine", SAME_MACHINE_OTHER, False, 0, "has ended on this machine"),
    ("other machine, unrenewed", OTHER_MACHINE, False, 60, "has not renewed it for 60 s"),
    ("alive here but unrenewed", SAME_MACHINE_OTHER, True, 60, "has not renewed it for 60 s"),
]


@pytest.mark.parametrize(("case", "holder", "alive", "waited", "why"), TAKEN, ids=[t[0] for t in TAKEN])
def test_a_lock_is_taken_over_only_when_its_holder_is_gone(
    case: str, holder: rl.RunIdentity | None, alive: bool, waited: int, why: str
) -> None:
    store, fake = MemoryObjectStore(), FakeTime()
    store.seed(holder)
    result = acquire(store, fake, alive=alive)
    assert result["acquired"]
    assert why in result["took_over"]
    assert fake.now == pytest.approx(waited, abs=rl.POLL_SECONDS)
    assert fake.now >= waited
    assert store.writes == ["replace"]
    assert rl.holder_of(store.objects[NAME]) == ME


def test_a_renewed_lock_is_waited_for_until_its_run_releases_it() -> None:
    store, fake = MemoryObjectStore(), FakeTime()
    store.seed(OTHER_MACHINE)

    def other_run(now: float) -> None:
        if now < 150 and int(now) % 20 == 0:  # renews every 20 s, past the 60 s duration: never stale
            lease = store.objects[NAME]
            store._stamp(lease, lease["metadata"]["uid"])
        elif now >= 150 and NAME in store.objects:
            del store.objects[NAME]  # its renewer released it at the end of its run

    fake.on_sleep = other_run
    result = acquire(store, fake)
    assert result["acquired"]
    assert result["took_over"] is None
    assert result["waited_for"] == "awx@ctl-b pid 100"
    assert 150 <= result["waited_seconds"] <= 150 + rl.POLL_SECONDS
    assert store.writes == ["create"]


def test_waiting_past_wait_timeout_fails_naming_the_holder_and_writes_nothing() -> None:
    store, fake = MemoryObjectStore(), FakeTime()
    store.seed(OTHER_MACHINE, seconds=3600)
    with pytest.raises(WaitTimeout) as caught:
        acquire(store, fake, wait=10)
    assert "awx@ctl-b pid 100" in caught.value.msg
    assert "run_lock_wait" in caught.value.msg
    assert fake.now >= 10
    assert store.writes == []


def test_a_lease_this_collection_did_not_write_is_refused() -> None:
    store, fake = MemoryObjectStore(), FakeTime()
    store.seed(None, labelled=False)
    with pytest.raises(ConflictError) as caught:
        acquire(store, fake)
    assert rl.PURPOSE_LABEL in caught.value.msg
    assert store.writes == []


def test_check_mode_reads_only_and_never_waits() -> None:
    store, fake = MemoryObjectStore(), FakeTime()
    assert acquire(store, fake, check_mode=True) == {"changed": True, "acquired": False, "took_over": None}
    store.seed(OTHER_MACHINE)
    result = acquire(store, fake, check_mode=True)
    assert result["would_wait_for"]["holder"] == "awx@ctl-b pid 100"
    assert (store.writes, fake.now) == ([], 0)


def test_a_run_that_loses_the_create_race_waits_for_the_winner() -> None:
    store, fake = MemoryObjectStore(), FakeTime()

    def other_run_first(_write: str) -> None:
        store.before_write = None
        store.seed(OTHER_MACHINE, seconds=3600)

    store.before_write = other_run_first
    with pytest.raises(WaitTimeout):
        acquire(store, fake, wait=4)
    assert store.writes == ["create"]
    assert rl.holder_of(store.objects[NAME]) == OTHER_MACHINE


def test_release_deletes_only_this_runs_lock() -> None:
    store = MemoryObjectStore()
    store.seed(OTHER_MACHINE)
    assert rl.release(store, NS, "gpu-1", ME) is False
    assert NAME in store.objects
    store.seed(ME)
    assert rl.release(store, NS, "gpu-1", ME, check_mode=True) is True
    assert NAME in store.objects
    assert rl.release(store, NS, "gpu-1", ME) is True
    assert NAME not in store.objects


def test_the_renewer_renews_every_third_of_the_duration_and_releases_when_the_run_ends() -> None:
    store, fake = MemoryObjectStore(), FakeTime()
    store.seed(ME, seconds=30)
    request = rl.LockRequest(NS, "gpu-1", ME, 30, 0)
    why = rl.renew_while_alive(
        store, [request], alive=lambda: fake.now < 65, clock=fake.clock, monotonic=fake.monotonic, sleep=fake.sleep
    )
    assert why == "the run ended"
    assert store.writes == ["replace"] * 6 + ["delete"]  # at 10, 20, ... 60 s, then the release
    assert NAME not in store.objects


def test_the_renewer_stops_when_another_run_holds_the_lock() -> None:
    store, fake = MemoryObjectStore(), FakeTime()
    store.seed(ME, seconds=30)
    fake.on_sleep = lambda now: store.seed(OTHER_MACHINE) if now == 5 else None
    request = rl.LockRequest(NS, "gpu-1", ME, 30, 0)
    why = rl.renew_while_alive(
        store, [request], alive=lambda: True, clock=fake.clock, monotonic=fake.monotonic, sleep=fake.sleep
    )
    assert why == "the lock was released or taken"
    assert store.writes == []
    assert rl.holder_of(store.objects[NAME]) == OTHER_MACHINE


def fake_proc(tmp_path: Path, processes: dict[int, tuple[int, str, str]]) -> Path:
    """``/proc`` with ``pid: (parent, comm, cmdline)``; cmdline parts separated by spaces."""
    for pid, (parent, comm, cmdline) in processes.items():
        directory = tmp_path / str(pid)
        directory.mkdir()
        fields = ["S", str(parent)] + ["0"] * 17 + [str(pid * 10)]
        (directory / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)} 0 0\n")
        (directory / "cmdline").write_bytes("\0".join(cmdline.split()).encode() + b"\0")
    return tmp_path


def test_the_run_is_the_outermost_ansible_playbook_above_the_module(tmp_path: Path) -> None:
    proc = fake_proc(
        tmp_path,
        {
            50: (1, "ansible-runner", "/usr/bin/python3 /usr/bin/ansible-runner run"),
            60: (50, "ansible-playboo", "/usr/bin/python3 /usr/local/bin/ansible-playbook site.yml"),
            70: (60, "ansible-playboo", "/usr/bin/python3 /usr/local/bin/ansible-playbook site.yml"),  # a worker
            80: (70, "sh", "/bin/sh -c python3 AnsiballZ_run_lock.py"),
            90: (80, "python3", "/usr/bin/python3 AnsiballZ_run_lock.py"),
        },
    )
    assert rl.playbook_pid(proc, start=90) == 60
    assert rl.process_start(60, proc) == "600"
    assert rl.playbook_pid(proc, start=50) is None  # no ansible process above: the caller falls back and warns


def test_a_process_start_time_is_read_past_a_command_name_with_spaces_and_parentheses(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, {7: (1, "odd) name (x", "odd")})
    assert rl.process_start(7, proc) == "70"
    assert rl.process_start(8, proc) == ""
    identity = rl.RunIdentity("h", "b", "n", 7, "70", "u")
    assert rl.process_alive(identity, proc)
    assert not rl.process_alive(rl.RunIdentity("h", "b", "n", 7, "71", "u"), proc)  # the PID was reused


def test_identities_round_trip_through_annotations_and_only_full_ones_count() -> None:
    assert rl.RunIdentity.from_annotations(ME.annotations()) == ME
    partial = {k: v for k, v in ME.annotations().items() if not k.endswith("boot_id")}
    assert rl.RunIdentity.from_annotations(partial) is None
    assert ME.same_machine(SAME_MACHINE_OTHER)
    assert not ME.same_machine(OTHER_MACHINE)
    assert not rl.RunIdentity("h", "", "", 1, "", "u").same_machine(rl.RunIdentity("h", "", "", 2, "", "u"))


DETACHED = textwrap.dedent(
    """
    import sys, time
    from support.collection import install_collection_finder
    install_collection_finder()
    from ansible_collections.metalplane.inference.plugins.module_utils._site.renewer import start_detached
    marker = sys.argv[1]
    def work():
        time.sleep(1.5)
        open(marker, "w").write("done")
    print(start_detached(work), flush=True)
    """
)


def test_the_detached_renewer_outlives_its_module_without_holding_the_modules_output(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    # The controller reads the module's output to its end: a renewer holding that pipe would hang the task.
    done = subprocess.run(
        [sys.executable, "-c", DETACHED, str(marker)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},  # where this test found its support package
    )
    pid = int(done.stdout.strip())
    assert not marker.exists()  # returned while the renewer still works
    deadline = monotonic() + 30
    while not marker.exists() and monotonic() < deadline:
        sleep(0.1)
    assert marker.read_text() == "done"
    assert pid > 0


# --------------------------------------------------------------------------------------------- many clusters, one run
def seed_lock(store: MemoryObjectStore, cluster: str, holder: rl.RunIdentity) -> None:
    body = rl.lease_body(NS, cluster, holder, 60, 1000.0)
    store._stamp(body, f"uid-{cluster}")


def test_one_renewer_renews_every_lock_and_keeps_those_another_run_did_not_take() -> None:
    store, fake = MemoryObjectStore(), FakeTime()
    for cluster in ("gpu-1", "gpu-2"):
        seed_lock(store, cluster, ME)
    # At 15 s another run holds gpu-1's (say, after this one's control plane was unreachable): it is dropped.
    fake.on_sleep = lambda now: seed_lock(store, "gpu-1", OTHER_MACHINE) if now == 15 else None
    requests = [rl.LockRequest(NS, cluster, ME, 30, 0) for cluster in ("gpu-1", "gpu-2")]
    why = rl.renew_while_alive(
        store, requests, alive=lambda: fake.now < 35, clock=fake.clock, monotonic=fake.monotonic, sleep=fake.sleep
    )
    assert why == "the run ended"
    # gpu-1 renewed at 10 s only; gpu-2 at 10, 20 and 30 s, then released; gpu-1 stays the other run's.
    assert store.writes == ["replace", "replace", "replace", "replace", "delete"]
    assert "metalplane-run.gpu-2" not in store.objects
    assert rl.holder_of(store.objects["metalplane-run.gpu-1"]) == OTHER_MACHINE


class LockModule:
    def __init__(self, **params: Any) -> None:
        self.params = {"lease_seconds": 60, "wait_timeout": 0, "clusters": None, "cluster": None, **params}
        self.check_mode = False


def test_many_clusters_are_taken_in_sorted_order_and_a_held_one_is_an_outcome_not_a_failure() -> None:
    from ansible_collections.metalplane.inference.plugins.modules import run_lock as module

    store = MemoryObjectStore()
    seed_lock(store, "gpu-2", OTHER_MACHINE)  # a live run on another machine holds it
    params = LockModule(clusters=["gpu-3", "gpu-1", "gpu-2", "gpu-1"])
    names = module.cluster_names(params.params)
    assert names == ["gpu-1", "gpu-2", "gpu-3"]
    outcomes = module.acquire_all(store, params, NS, names, ME)
    by_cluster = {request.cluster: outcome for request, outcome in outcomes}
    assert [request.cluster for request, _o in outcomes] == names
    assert by_cluster["gpu-1"]["acquired"] is True
    assert by_cluster["gpu-3"]["acquired"] is True
    assert by_cluster["gpu-2"]["acquired"] is False
    assert by_cluster["gpu-2"]["failed"] is True
    assert "Cluster gpu-2 is being converged by another run" in by_cluster["gpu-2"]["msg"]
    assert rl.holder_of(store.objects["metalplane-run.gpu-2"]) == OTHER_MACHINE


def test_an_error_midway_releases_the_locks_this_run_took_before_it_is_raised() -> None:
    from ansible_collections.metalplane.inference.plugins.modules import run_lock as module

    store = MemoryObjectStore()

    def fail_the_third(_action: str) -> None:
        if len(store.writes) == 2:
            raise ConflictError("the control plane refused")

    store.before_write = fail_the_third
    params = LockModule(clusters=["gpu-1", "gpu-2", "gpu-3"])
    with pytest.raises(ConflictError):
        module.acquire_all(store, params, NS, ["gpu-1", "gpu-2", "gpu-3"], ME)
    assert store.objects == {}  # the two taken were released


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cluster": "gpu-1", "clusters": ["gpu-2"]}, "clusters"),
        ({}, "cluster"),
        ({"clusters": ["Not_A_Label"]}, "clusters[0]"),
    ],
)
def test_cluster_or_clusters(params: dict[str, Any], field: str) -> None:
    from ansible_collections.metalplane.inference.plugins.modules import run_lock as module

    with pytest.raises(InputError) as raised:
        module.cluster_names(LockModule(**params).params)
    assert raised.value.field == field
