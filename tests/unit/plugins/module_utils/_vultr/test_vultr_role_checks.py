"""The vke_cluster role's input checks (its old validate.yml Jinja), now vke_preflight's rules named by variable.

Table-driven: each case is one mistake in the role's variables, the variable the problem must name and
words of its message; the checks need no request, so no catalogue appears here.
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.filter.vultr import FilterModule
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.node_pool import is_vke_label
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.plans import plan_id_gpu_model
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.preflight import (
    gpu_model,
    gpu_type_problem,
)
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.role_checks import vke_cluster_problems

A16 = "vcg-a16-6c-64g-16vram"
L40S = "vcg-l40s-16c-180g-48vram"
POOLS: list[dict[str, Any]] = [
    {"name": "gpu-a16", "plan": A16, "gpu": {"type": "A16", "count": 1}, "node_quantity": 1},
    {"name": "gpu-l40s", "plan": L40S, "gpu": {"type": "NVIDIA L40S", "count": 1}, "node_quantity": 2, "max_nodes": 3},
]
GOOD: dict[str, Any] = {"label": "inference-lab", "kubeconfig_dir": "/var/lib/kube", "state": "present"}


def pools_with(index: int, **changes: Any) -> list[dict[str, Any]]:
    pools = [dict(p) for p in POOLS]
    pools[index] = {**pools[index], **changes}
    return pools


def problems(pools: Any = None, **changes: Any) -> dict[str, list[str]]:
    """Variable -> the messages of its problems."""
    found: dict[str, list[str]] = {}
    for p in vke_cluster_problems(POOLS if pools is None else pools, **{**GOOD, **changes}):
        found.setdefault(p.field, []).append(p.msg)
    return found


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"label": "Inference_Lab.2"},  # a VKE label is more than a DNS label
        {"kubeconfig_dir": "~/kube"},  # absolute once the home directory is expanded
        {"state": "absent"},
    ],
    ids=["sound", "label-with-capitals-dot-underscore", "kubeconfig-dir-under-home", "absent"],
)
def test_sound_variables_have_no_problem(changes: dict[str, Any]) -> None:
    assert problems(**changes) == {}


@pytest.mark.parametrize(
    ("pools", "changes", "field", "words"),
    [
        (None, {"label": "bad/label"}, "vke_cluster_label", 'kubeconfig file name), got "bad/label"'),
        (None, {"label": "-lab"}, "vke_cluster_label", "starting with a letter or digit"),
        (None, {"label": "x" * 64}, "vke_cluster_label", "1-63"),
        (None, {"label": 7}, "vke_cluster_label", "got 7"),
        (None, {"kubeconfig_dir": "kube"}, "vke_cluster_kubeconfig_dir", 'absolute path, got "kube"'),
        (
            [POOLS[0], {**POOLS[1], "name": "gpu-a16"}],
            {},
            "vke_cluster_gpu_pools",
            "must be unique: 'gpu-a16' is used twice",
        ),
        (pools_with(0, name="system"), {}, "vke_cluster_gpu_pools", "'system' is the label of the system pool"),
        ([{**POOLS[0], "name": f"gpu-{i}"} for i in range(9)], {}, "vke_cluster_gpu_pools", "at most 8"),
        ({"name": "gpu-a16"}, {}, "vke_cluster_gpu_pools", "must be a list"),
        (pools_with(1, name="GPU_L40S"), {}, 'vke_cluster_gpu_pools[1] ("GPU_L40S").name', "DNS label"),
        (pools_with(0, plan="vc2-4c-8gb"), {}, 'vke_cluster_gpu_pools[0] ("gpu-a16").plan', "not a GPU plan"),
        (
            pools_with(0, gpu={"type": "L40S", "count": 1}),
            {},
            'vke_cluster_gpu_pools[0] ("gpu-a16").gpu.type',
            f"'L40S' does not match {A16} (a a16 plan)",
        ),
        (
            pools_with(0, gpu={"type": "NVIDIA", "count": 1}),
            {},
            'vke_cluster_gpu_pools[0] ("gpu-a16").gpu.type',
            "'NVIDIA' names no GPU model",
        ),
        (pools_with(0, gpu={"type": "A16", "count": 0}), {}, 'vke_cluster_gpu_pools[0] ("gpu-a16").gpu.count', "1 and"),
        (pools_with(0, node_quantity=0), {}, 'vke_cluster_gpu_pools[0] ("gpu-a16").node_quantity', "between 1"),
        (pools_with(0, min_nodes=0, max_nodes=2), {}, 'vke_cluster_gpu_pools[0] ("gpu-a16").min_nodes', "between 1"),
        (pools_with(1, node_quantity=4), {}, 'vke_cluster_gpu_pools[1] ("gpu-l40s").node_quantity', "above max_nodes"),
        (
            pools_with(1, min_nodes=3, max_nodes=2, node_quantity=2),
            {},
            'vke_cluster_gpu_pools[1] ("gpu-l40s").node_quantity',
            "below min_nodes (3)",
        ),
        (pools_with(0, min_nodes=1), {}, 'vke_cluster_gpu_pools[0] ("gpu-a16").min_nodes', "needs max_nodes"),
        ([{**POOLS[0], "name": ""}], {}, "vke_cluster_gpu_pools[0].name", "required"),
    ],
    ids=[
        "label-with-slash",
        "label-starting-with-dash",
        "label-too-long",
        "label-not-a-string",
        "relative-kubeconfig-dir",
        "duplicate-pool",
        "system-pool-name",
        "too-many-pools",
        "pools-not-a-list",
        "pool-name-not-a-dns-label",
        "plan-not-vcg",
        "gpu-type-not-the-plans",
        "gpu-type-names-no-model",
        "gpu-count-zero",
        "node-quantity-zero",
        "min-nodes-zero",
        "above-max-nodes",
        "min-above-max",
        "min-without-max",
        "unnamed-pool",
    ],
)
def test_problem_names_the_variable(pools: Any, changes: dict[str, Any], field: str, words: str) -> None:
    found = problems(pools, **changes)
    assert field in found, found
    assert any(words in msg for msg in found[field]), found[field]


def test_a_type_that_names_no_model_is_one_problem() -> None:
    found = problems(pools_with(0, gpu={"type": "NVIDIA", "count": 1}))
    assert found == {
        'vke_cluster_gpu_pools[0] ("gpu-a16").gpu.type': ["'NVIDIA' names no GPU model (for example L40S or A16)"]
    }


def test_every_problem_is_reported_at_once() -> None:
    bad = pools_with(0, plan="vc2-4c-8gb", node_quantity=0)
    found = problems(bad, label="bad/label", kubeconfig_dir="kube")
    assert set(found) == {
        "vke_cluster_label",
        "vke_cluster_kubeconfig_dir",
        'vke_cluster_gpu_pools[0] ("gpu-a16").plan',
        'vke_cluster_gpu_pools[0] ("gpu-a16").node_quantity',
    }


def test_a_teardown_does_not_check_the_pools() -> None:
    bad = pools_with(0, plan="vc2-4c-8gb", name="system")
    assert set(problems(bad, state="absent")) == set()
    assert set(problems(bad, state="absent", label="bad/label")) == {"vke_cluster_label"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("inference-lab", True),
        ("Lab_1.b", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("a/b", False),
        ("_lab", False),
        ("", False),
        ("lab\n", False),
    ],
)
def test_is_vke_label(value: str, expected: bool) -> None:
    assert is_vke_label(value) is expected


@pytest.mark.parametrize(
    ("gpu_type", "model"),
    [
        ("L40S", "l40s"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA_L40S", "l40s"),
        ("nvidia-a100", "a100"),
        ("AMD MI300X", "mi300x"),
        ("A100 80GB", "a10080gb"),
        ("NVIDIA", ""),
    ],
)
def test_gpu_model(gpu_type: str, model: str) -> None:
    assert gpu_model(gpu_type) == model
    assert FilterModule().filters()["vke_gpu_model"](gpu_type) == model


@pytest.mark.parametrize(
    ("plan", "model"),
    [
        (L40S, "l40s"),
        ("VCG-A16-2C-8G-2VRAM", "a16"),
        ("vcg-b200-248c-2826gb-1536vram", "b200"),
        ("vcg-a16", None),
        ("vc2-1c-1gb", None),
    ],
)
def test_plan_id_gpu_model(plan: str, model: str | None) -> None:
    assert plan_id_gpu_model(plan) == model


@pytest.mark.parametrize(
    ("gpu_type", "plan_model", "wrong"),
    [
        ("L40S", "l40s", False),
        ("nvidia_l40s", "l40s", False),
        ("A16", "l40s", True),
        ("A16", None, False),
        ("", "l40s", False),
        ("NVIDIA", "l40s", False),
    ],
)
def test_gpu_type_problem(gpu_type: str, plan_model: str | None, wrong: bool) -> None:
    assert (gpu_type_problem(gpu_type, L40S, plan_model) is not None) is wrong


def test_the_filter_gives_one_line_per_problem() -> None:
    check = FilterModule().filters()["vke_cluster_problems"]
    assert check(POOLS, label="inference-lab", kubeconfig_dir="/k", state="present") == []
    assert check(POOLS, label="a/b", kubeconfig_dir="/k") == [
        "vke_cluster_label: must be 1-63 letters, digits, '.', '_' or '-' starting with a letter or digit (it "
        'is also the kubeconfig file name), got "a/b"'
    ]
