"""The pool decisions the ``vke_cluster`` role used to take in Jinja, now in ``_vultr``, table by table.

Which pools a run creates (the one "needs a new pool" planner), which of our pools no listed label
accounts for (``remove_extra_pools``), whether a plan gives a pool's ``gpu_count``, and the system
pool's defaults, declared once. No network: a recording client answers the catalogue reads.
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError, InputError
from ansible_collections.metalplane.inference.plugins.module_utils._common.files import write_private_file
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import VultrClient
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.cluster import (
    CLUSTER_OWNER_TAG,
    SYSTEM_POOL_DEFAULTS,
    cluster_spec_from_params,
)
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.cluster_ops import (
    _converge_pools,
    _find,
    _pool_specs,
)
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.node_pool import (
    OWNER_TAG,
    extra_pools,
    pool_spec_from_params,
    replacement_label,
)
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.plans import gpu_count_problem
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.pool_args import system_pool_spec
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.pool_ops import PoolOptions, creates_pool

L40S = "vcg-l40s-16c-180g-48vram"  # 1 x L40S (48 GB)
A16 = "vcg-a16-6c-64g-16vram"  # 1 x A16 (16 GB)
AVAILABILITY = "/regions/ewr/availability"
PLANS = "/plans"
GEN = replacement_label("gpu", L40S)  # a replace generation of "gpu"


def pool(label: str, plan: str = L40S, tag: str = OWNER_TAG, **extra: Any) -> dict[str, Any]:
    spec = pool_spec_from_params({"label": label, "plan": plan, "node_quantity": 1})
    return {"id": f"id-{label}", "status": "active", "nodes": [], **spec.as_dict(), "tag": tag, **extra}


SYSTEM = pool("system", "vc2-6c-16gb", CLUSTER_OWNER_TAG)


# (observed pools, desired plan, options, expected: True/False or the error raised)
CREATES = [
    ([], L40S, {}, True),  # nothing there: create
    ([pool("gpu")], L40S, {}, False),  # same plan: at most a PATCH
    ([pool("gpu", node_quantity=3)], L40S, {}, False),  # size differs: PATCH, no POST
    ([pool("gpu", A16)], L40S, {"replace": True}, True),  # plan differs, replace allowed: a new pool
    ([pool("gpu", A16)], L40S, {}, ConflictError),  # plan differs without replace: refused, no read
    ([pool("gpu", tag="someone-else")], L40S, {}, ConflictError),  # foreign pool without force
    ([pool("gpu", A16, tag="someone-else")], L40S, {"force": True, "replace": True}, True),  # adopted, replaced
    ([pool(GEN)], L40S, {}, False),  # a generation with the desired plan is the current pool
    ([pool("other")], L40S, {}, True),  # another label does not count
]


@pytest.mark.parametrize(("pools", "plan", "options", "expected"), CREATES)
def test_creates_pool(pools: list[dict[str, Any]], plan: str, options: dict[str, Any], expected: Any) -> None:
    cluster = {"id": "c1", "label": "inf", "region": "ewr", "node_pools": [SYSTEM, *pools]}
    spec = pool_spec_from_params({"label": "gpu", "plan": plan, "node_quantity": 1})
    if isinstance(expected, bool):
        assert creates_pool(cluster, spec, PoolOptions(**options)) is expected
    else:
        with pytest.raises(expected):
            creates_pool(cluster, spec, PoolOptions(**options))


# (pools in the cluster, listed labels, labels of the extra pools)
EXTRA = [
    ([SYSTEM, pool("gpu")], ["gpu"], []),
    ([SYSTEM, pool("gpu"), pool("old")], ["gpu"], ["old"]),
    ([SYSTEM, pool("gpu"), pool("old")], [], ["gpu", "old"]),  # nothing listed: every pool of ours
    ([SYSTEM, pool(GEN)], ["gpu"], []),  # a generation of a listed label
    ([SYSTEM, pool("gpu")], [GEN], []),  # the base of a listed generation
    ([SYSTEM, pool("gpu-x")], ["gpu"], ["gpu-x"]),  # a longer label is not a generation
    ([SYSTEM, pool("gpu-abcdeg")], ["gpu"], ["gpu-abcdeg"]),  # 'g' is not hex
    ([SYSTEM, pool("theirs", tag="someone-else")], [], []),  # another tag is never ours to delete
    ([pool("b"), pool("a")], [], ["a", "b"]),  # label order
]


@pytest.mark.parametrize(("pools", "listed", "expected"), EXTRA)
def test_extra_pools(pools: list[dict[str, Any]], listed: list[str], expected: list[str]) -> None:
    assert [p["label"] for p in extra_pools(pools, listed)] == expected


# (plan summary from the catalogue, declared gpu_count, problem or None)
GPU_COUNTS = [
    ({"id": L40S, "gpu_count": 1}, 1, None),
    ({"id": L40S, "gpu_count": 1}, 2, "has 1 GPU(s) per node, gpu_count says 2"),
    ({"id": "vcg-a100-96c-960g-640vram", "gpu_count": 8}, 8, None),
    ({"id": "vcg-new-1c-1g-99vram", "gpu_count": None}, 4, None),  # unknown count: passes
    (None, 1, "is not a GPU plan Vultr lists"),
]


@pytest.mark.parametrize(("described", "count", "problem"), GPU_COUNTS)
def test_gpu_count_problem(described: dict[str, Any] | None, count: int, problem: str | None) -> None:
    assert gpu_count_problem(described, count) == problem


class Catalogue(VultrClient):
    """Answers the region's availability and the plan list; records every request, refuses writes."""

    def __init__(self) -> None:
        super().__init__("k", api_endpoint="http://127.0.0.1:9")
        self.paths: list[str] = []

    def request(self, method: str, url: str, data: Any = None, params: dict[str, Any] | None = None) -> Any:
        path = self._path(url)
        self.paths.append(f"{method.upper()} {path}")
        if method.upper() == "GET" and path == AVAILABILITY:
            return {"available_plans": ["vc2-6c-16gb", L40S, A16]}
        if method.upper() == "GET" and path == PLANS:
            plans = [{"id": plan, "type": "vdm"} for plan in ("vc2-6c-16gb", L40S, A16)]
            return {"plans": plans, "meta": {"total": len(plans), "links": {"next": ""}}}
        raise AssertionError(f"unexpected request {method} {path}")


CLUSTER = {"id": "c1", "label": "inf", "region": "ewr", "node_pools": [SYSTEM, pool("gpu"), pool("old")]}


def converge(items: list[dict[str, Any]], client: Catalogue, *, check: bool = False, **options: Any) -> Any:
    params = {"node_pools": items, "wait": True, "wait_timeout": 60, **options}
    return _converge_pools(client, CLUSTER, _pool_specs(params), params=params, check=check)


# (node_pools, the requests before the error (or the end), the error's text or None)
GPU_CHECKS = [
    # An existing pool: no catalogue read, whatever gpu_count says.
    ([{"label": "gpu", "plan": L40S, "node_quantity": 1, "gpu_count": 2}], [], None),
    # A new pool without gpu_count: availability only.
    ([{"label": "new", "plan": A16, "node_quantity": 1}], [f"GET {AVAILABILITY}"], None),
    # A new pool with the right gpu_count: availability and the plan list.
    (
        [{"label": "new", "plan": A16, "node_quantity": 1, "gpu_count": 1}],
        [f"GET {AVAILABILITY}", f"GET {PLANS}"],
        None,
    ),
    (
        [{"label": "new", "plan": A16, "node_quantity": 1, "gpu_count": 2}],
        [f"GET {AVAILABILITY}", f"GET {PLANS}"],
        "node_pools[0].gpu_count: plan 'vcg-a16-6c-64g-16vram' has 1 GPU(s) per node, gpu_count says 2",
    ),
    (
        [{"label": "new", "plan": "vc2-6c-16gb", "node_quantity": 1, "gpu_count": 1}],
        [f"GET {AVAILABILITY}", f"GET {PLANS}"],
        "is not a GPU plan Vultr lists",
    ),
]


@pytest.mark.parametrize(("items", "requests", "error"), GPU_CHECKS)
def test_gpu_count_is_checked_for_new_pools_only(items: list[dict[str, Any]], requests: list[str], error: str) -> None:
    client = Catalogue()
    if error is None:
        converge(items, client, check=True)
    else:
        with pytest.raises(InputError) as caught:
            converge(items, client, check=True)
        assert error in str(caught.value)
    assert client.paths == requests


def test_gpu_count_below_one_is_refused_before_any_request() -> None:
    with pytest.raises(InputError, match=r"node_pools\[0\]\.gpu_count: must be at least 1"):
        _pool_specs({"node_pools": [{"label": "gpu", "plan": L40S, "gpu_count": 0}]})


@pytest.mark.parametrize(
    ("remove", "actions"),
    [(False, []), (True, ["old: delete pool old (ours, not listed)"])],
)
def test_remove_extra_pools_in_check_mode(remove: bool, actions: list[str]) -> None:
    client = Catalogue()
    step = converge([{"label": "gpu", "plan": L40S, "node_quantity": 1}], client, check=True, remove_extra_pools=remove)
    assert step.actions == actions
    assert step.changed is bool(actions)
    assert client.paths == []


def test_system_pool_defaults_are_declared_once() -> None:
    spec = system_pool_spec()
    assert {name: option["default"] for name, option in spec.items() if "default" in option} == SYSTEM_POOL_DEFAULTS
    # Ansible fills the defaults in: the same spec as no system_pool at all.
    filled = {name: option.get("default") for name, option in spec.items()}
    assert cluster_spec_from_params({"label": "c", "system_pool": filled}) == cluster_spec_from_params({"label": "c"})


def test_ownership_messages_name_the_marker_constant() -> None:
    class Listing(VultrClient):
        def __init__(self) -> None:
            super().__init__("k", api_endpoint="http://127.0.0.1:9")

        def request(self, method: str, url: str, data: Any = None, params: dict[str, Any] | None = None) -> Any:
            foreign = {"id": "c9", "label": "inf", "node_pools": [pool("gpu")]}
            return {"vke_clusters": [foreign], "meta": {"total": 1, "links": {"next": ""}}}

    with pytest.raises(ConflictError, match=f"no node pool tagged '{CLUSTER_OWNER_TAG}'"):
        _find(Listing(), cluster_spec_from_params({"label": "inf"}), force=False)


@pytest.mark.parametrize(("exists", "mode"), [(False, 0o700), (True, 0o755)])
def test_kubeconfig_directory_is_created_private(tmp_path: Any, exists: bool, mode: int) -> None:
    """``vke_cluster`` writes the kubeconfig before the role sees its directory: a new one is 0700 at once,
    an existing one is left as it is (the role sets its mode)."""
    directory = tmp_path / "kube"
    if exists:
        directory.mkdir(mode=0o755)
        directory.chmod(0o755)
    assert write_private_file(directory / "c.kubeconfig", b"secret") is True
    assert directory.stat().st_mode & 0o777 == mode
    assert (directory / "c.kubeconfig").stat().st_mode & 0o777 == 0o600
