# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waits on VKE objects: cluster/pool/nodes ``active``, cluster or pool gone.

Why: VKE reports ``pending`` then ``active`` (no enum, so anything else is "not yet"). Every wait
goes through ``_common.waiting.wait_for`` with :data:`POLL_BACKOFF`: never more than one poll every
2 s (Vultr rate-limits at 30 req/s per IP and a fleet run shares it), at most 10 s between polls,
so ``active`` is noticed within one poll interval.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import NotFoundError
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for

from .client import VultrClient

ACTIVE = "active"
# 2 s floor: the fastest a wait may poll; 10 s cap: the longest it may take to notice a change.
POLL_BACKOFF = Backoff(initial=2.0, cap=10.0, factor=1.5, jitter=0.1, floor=2.0)


def pool_ready(pool: dict[str, Any]) -> bool:
    """Pool active, as many nodes as it reports, and every node active."""
    nodes = pool.get("nodes") or []
    return (
        pool.get("status") == ACTIVE
        and len(nodes) == int(pool.get("node_quantity") or 0)
        and all(node.get("status", ACTIVE) == ACTIVE for node in nodes)
    )


def cluster_ready(cluster: dict[str, Any]) -> bool:
    return cluster.get("status") == ACTIVE and all(pool_ready(p) for p in cluster.get("node_pools") or [])


def status_view(obj: dict[str, Any]) -> dict[str, Any]:
    """What a timeout message shows: statuses, not the whole object."""
    view: dict[str, Any] = {"status": obj.get("status")}
    if "node_pools" in obj:
        view["node_pools"] = {p.get("label"): status_view(p) for p in obj.get("node_pools") or []}
    if "nodes" in obj:
        view["nodes"] = {n.get("label"): n.get("status") for n in obj.get("nodes") or []}
    return view


def wait_cluster_active(client: VultrClient, cluster_id: str, timeout: float) -> dict[str, Any]:
    def observe() -> Poll[dict[str, Any]]:
        cluster = client.call("GET", f"/kubernetes/clusters/{cluster_id}")["vke_cluster"]
        return Poll(cluster_ready(cluster), cluster)

    return _wait(observe, timeout, f"VKE cluster {cluster_id} and its node pools to be active")


def wait_pool_active(client: VultrClient, cluster_id: str, pool_id: str, timeout: float) -> dict[str, Any]:
    def observe() -> Poll[dict[str, Any]]:
        pool = client.call("GET", f"/kubernetes/clusters/{cluster_id}/node-pools/{pool_id}")["node_pool"]
        return Poll(pool_ready(pool), pool)

    return _wait(observe, timeout, f"node pool {pool_id} and its nodes to be active")


def wait_gone(client: VultrClient, path: str, timeout: float, what: str) -> None:
    def observe() -> Poll[Any]:
        try:
            obj = client.call("GET", path)
        except NotFoundError:
            return Poll(True, None)
        return Poll(False, obj)

    wait_for(observe, timeout=timeout, what=f"{what} to be deleted", backoff=POLL_BACKOFF)


def _wait(observe: Any, timeout: float, what: str) -> dict[str, Any]:
    """Wait; a timeout reports only statuses (short, and free of node details)."""

    def summarised() -> Poll[Any]:
        poll = observe()
        return poll if poll.done else Poll(False, status_view(poll.value))

    return wait_for(summarised, timeout=timeout, what=what, backoff=POLL_BACKOFF)
