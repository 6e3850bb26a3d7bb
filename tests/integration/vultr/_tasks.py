"""Playbook tasks the Vultr integration tests build, in one place.

Every test works on one cluster, label ``inf`` in ``ewr`` at version ``1.36``: the task builders
fill those in so a test names only what it is about.
"""

from __future__ import annotations

from typing import Any


def cluster_task(name: str, **options: Any) -> dict[str, Any]:
    """A ``vke_cluster`` task on the test cluster, with ``options`` on top of its identity."""
    return {
        "name": name,
        "metalplane.inference.vke_cluster": {"label": "inf", "region": "ewr", "version": "1.36", **options},
    }


def pool_task(name: str, **options: Any) -> dict[str, Any]:
    """A ``vke_node_pool`` task on the test cluster."""
    return {"name": name, "metalplane.inference.vke_node_pool": {"cluster": "inf", **options}}


def failing(task: dict[str, Any]) -> dict[str, Any]:
    """``task``, allowed to fail so the play goes on and the test reads its result."""
    return {**task, "ignore_errors": True}
