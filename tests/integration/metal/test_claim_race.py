"""Two controllers claim the same pool's only host at the same instant, 50 times: exactly one wins every time.

Two OS processes run the claim code against the lab's Kubernetes API (Leases with AlreadyExists and
resourceVersion conflicts), released by a barrier together each round. Even rounds race on a host that has no
Lease (atomic create); odd rounds on a released Lease with an empty holder (update carrying the
resourceVersion). The loser must be refused naming the pool (no free host), never win too.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from typing import Any

import pytest
from integration.metal.claim_race_worker import contend

from lab.kube.server import KubeEmulator

NS = "modelplane-system"
ROUNDS = 50
POOL = "race"
HOST = {
    "name": "only",
    "bmc_url": "https://127.0.0.1:9",  # never contacted: the workers' BMC stand-in answers
    "username": "root",
    "password": "pw",
    "boot_mac": "00:5c:52:31:3a:9c",
}
# Seconds a barrier or a result may take before the test gives up (a hung worker must not hang the suite).
WAIT = 60

pytestmark = pytest.mark.slow


@pytest.fixture
def kube() -> Iterator[KubeEmulator]:
    with KubeEmulator(delay_scale=0.0, name="modelplane-race") as api:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield api


def _params(kubeconfig: str, cluster: str) -> dict[str, Any]:
    return {
        "kubeconfig": kubeconfig,
        "context": None,
        "validate_certs": None,
        "pool": POOL,
        "hosts": [HOST],
        "requirements": None,
        "namespace": NS,
        "api_timeout": 30,
        "cluster": cluster,
        "state": "present",
        "claimer": f"{cluster}@race",
        "bmc_hint": False,
    }


def _released_lease(kube: KubeEmulator) -> None:
    """The state a release by an older controller may leave: the Lease kept, its holder emptied."""
    from support.collection import install_collection_finder

    install_collection_finder()
    from ansible_collections.metalplane.inference.plugins.module_utils._metal import claims
    from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import parse_hosts

    (host,) = parse_hosts([HOST], POOL)
    body = claims.lease_body(
        NS, POOL, host, cluster="", claimer="old", since="2026-01-01T00:00:00.000000Z", generation=1
    )
    kube.create(body)


def test_exactly_one_of_two_processes_wins_every_round(kube: KubeEmulator) -> None:
    ctx = multiprocessing.get_context("spawn")
    start, done = ctx.Barrier(3, timeout=WAIT), ctx.Barrier(3, timeout=WAIT)
    results = ctx.Queue()
    workers = [
        ctx.Process(target=contend, args=(_params(str(kube.kubeconfig_path), c), ROUNDS, start, done, results))
        for c in ("dc-a", "dc-b")
    ]
    for worker in workers:
        worker.start()
    winners: dict[str, int] = {"dc-a": 0, "dc-b": 0}
    lost_on_write = 0
    try:
        for round_number in range(ROUNDS):
            for lease in kube.list("coordination.k8s.io/v1", "Lease", namespace=NS):
                kube.delete("coordination.k8s.io/v1", "Lease", lease["metadata"]["name"], NS)
            if round_number % 2:
                _released_lease(kube)
            start.wait()
            outcomes = sorted(results.get(timeout=WAIT) for _unused in workers)
            done.wait()
            won = [o for o in outcomes if o[2] == "won"]
            assert len(won) == 1, f"round {round_number}: {outcomes}"
            (loser,) = [o for o in outcomes if o[2] != "won"]
            assert loser[2:4] == ("input", "pool"), f"round {round_number}: {outcomes}"
            lost_on_write += loser[4] == "409"
            (lease,) = kube.list("coordination.k8s.io/v1", "Lease", namespace=NS)
            assert lease["spec"]["holderIdentity"] == won[0][1], f"round {round_number}: {outcomes}"
            winners[won[0][1]] += 1
    finally:
        for worker in workers:
            worker.join(timeout=WAIT)
            if worker.is_alive():
                worker.kill()
    assert all(worker.exitcode == 0 for worker in workers)
    assert sum(winners.values()) == ROUNDS
    # How often the loser got as far as the write (the API's 409 decided) rather than seeing the winner's Lease
    # when it listed: timing-dependent, so reported, not asserted.
    print(f"claim race: winners {winners}, {lost_on_write}/{ROUNDS} rounds decided by a 409 on the Lease write")
