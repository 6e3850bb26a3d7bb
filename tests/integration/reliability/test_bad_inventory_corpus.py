"""Bad input, inventory variables of the VKE path (issue 20, part 3), in two site.yml runs.

Inventories of clusters, each wrong in exactly one way a new user could get it wrong (names that are not labels,
a 300-character or non-ASCII label, unknown regions, versions and plans, GPU counts and models that do not match the
plan, label and taint syntax, overlapping networks, duplicate names across clusters, a state that does not exist).
The preflight checks the whole inventory before anything is created, so one run must refuse every case, each naming
its cluster and field (a second run holds the cases only the Vultr catalogue refuses: the preflight asks it once the
inventory's shape is sound), and the platforms must see no write: Vultr only GETs, the control plane nothing but reads.
The module options' corpus is bad_input_corpus.py.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml
from integration.reliability.vke_lab import INVENTORY, SITE, VkeLabContext

from support.figures import record
from support.playbook import SHORT_TMP_ROOT, run_playbook

API_KEY = "lab-vultr-api-key-inventory"
PREFLIGHT = "Check every cluster against the inventory rules and the Vultr account (read-only)"
POOL = {"name": "l40s-1x", "plan": "vcg-l40s-16c-180g-48vram", "gpu": {"type": "L40S", "count": 1}, "node_quantity": 1}
GOOD = {"vke_cluster_region": "ewr", "vke_cluster_version": "latest", "vke_cluster_gpu_pools": [POOL]}


def pool(**changes: Any) -> list[dict[str, Any]]:
    return [{**POOL, **changes}]


# (inventory host, its variables over GOOD, the field its problem names, words of the message). Host names are
# inventory names; the cluster's label is the host name unless vke_cluster_label sets one.
Case = tuple[str, dict[str, Any], str, str]
# What the inventory's rules refuse without asking Vultr.
SHAPE: list[Case] = [
    ("quantity", {"vke_cluster_gpu_pools": pool(node_quantity=3, max_nodes=2)}, ".node_quantity", "3"),
    ("zero", {"vke_cluster_gpu_pools": pool(node_quantity=0)}, ".node_quantity", "0"),
    ("gpu-word", {"vke_cluster_gpu_pools": pool(gpu={"type": "L40S", "count": "two"})}, ".gpu.count", "two"),
    ("no-plan", {"vke_cluster_gpu_pools": pool(plan="")}, ".plan", "required"),
    ("cpu-plan", {"vke_cluster_gpu_pools": pool(plan="vc2-6c-16gb")}, ".plan", "vc2-6c-16gb"),
    ("pool-name", {"vke_cluster_gpu_pools": pool(name="L40S_pool")}, ".name", "L40S_pool"),
    ("pool-dup", {"vke_cluster_gpu_pools": [POOL, POOL]}, "gpu_pools", "l40s-1x"),
    ("pool-key", {"vke_cluster_gpu_pools": pool(node_count=2)}, "gpu_pools", "node_count"),
    ("node-label", {"vke_cluster_gpu_pools": pool(labels={"bad key!": "x"})}, ".labels", "bad key!"),
    ("label-value", {"vke_cluster_gpu_pools": pool(labels={"team": "x" * 64})}, ".labels", "63"),
    (
        "taint",
        {"vke_cluster_gpu_pools": pool(taints=[{"key": "k", "value": "v", "effect": "Sometimes"}])},
        ".taints",
        "Sometimes",
    ),
    (
        "taint-key",
        {"vke_cluster_gpu_pools": pool(taints=[{"key": "no spaces", "effect": "NoSchedule"}])},
        ".taints",
        "no spaces",
    ),
    ("vke-overlap", {"cluster_networks": ["10.244.0.0/20"]}, "vke-overlap-c.networks", "10.244.0.0/20"),
    ("reserved", {"cluster_networks": ["10.40.0.0/20"]}, "reserved-c.networks", "10.40.0.0/20"),
    ("not-cidr", {"cluster_networks": ["10.0.0.0/33"]}, "not-cidr-c.networks", "10.0.0.0/33"),
    ("long-label", {"vke_cluster_label": "a" * 300}, "a" * 300, "(300 characters)"),
    ("unicode", {"vke_cluster_label": "clüster-ewr"}, "clüster-ewr", "clüster-ewr"),
    ("slash", {"vke_cluster_label": "team/gpu"}, "team/gpu", "team/gpu"),
    ("dup-label-a", {"vke_cluster_label": "twin-label", "cluster_networks": ["10.50.0.0/20"]}, "twin-label", "twin"),
    ("dup-label-b", {"vke_cluster_label": "twin-label", "cluster_networks": ["10.51.0.0/20"]}, "twin-label", "twin"),
    ("net-a", {"cluster_networks": ["10.60.0.0/20"]}, "net-b-c.networks", "10.60.0.0/20"),
    ("net-b", {"cluster_networks": ["10.60.8.0/21"]}, "net-b-c.networks", "10.60.8.0/21"),
    ("state", {"cluster_state": "gone"}, "state-c.state", "gone"),
]
# What only the Vultr account's catalogue refuses (checked once the inventory's shape is sound).
PLATFORM: list[Case] = [
    ("region", {"vke_cluster_region": "mars"}, "region-c", "mars"),
    ("version", {"vke_cluster_version": "0.9"}, "version-c", "0.9"),
    ("plan", {"vke_cluster_gpu_pools": pool(plan="vcg-nope-1c-1g-1vram")}, "plan-c", "vcg-nope-1c-1g-1vram"),
    ("gpu-type", {"vke_cluster_gpu_pools": pool(gpu={"type": "A16", "count": 1})}, "gpu-type-c", "l40s"),
    ("gpu-count", {"vke_cluster_gpu_pools": pool(gpu={"type": "L40S", "count": 4})}, "gpu-count-c", "4"),
]


def inventory(directory: Path, cases: list[Case]) -> Path:
    """The lab inventory's group variables with the cases' clusters as the VKE group."""
    shutil.copytree(INVENTORY / "group_vars", directory / "group_vars")
    hosts = {f"{name}-c": {**GOOD, **variables} for name, variables, _field, _words in cases}
    (directory / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {"localhost": {"ansible_connection": "local"}},
                    "children": {"vke_clusters": {"hosts": hosts}},
                }
            }
        )
    )
    return directory


def refused(run: Any, cases: list[Case]) -> tuple[list[str], list[str]]:
    """The preflight's problems, and the cases none of them names (field and value)."""
    assert run.rc != 0
    failed = [
        result
        for play in run.report.get("plays", [])
        for task in play["tasks"]
        if task["task"]["name"] == PREFLIGHT
        for result in task["hosts"].values()
        if result.get("failed")
    ]
    assert len(failed) == 1, run.stdout[-3000:]
    problems = [f"{p['field']}: {p['msg']}" for p in failed[0]["error"]["problems"]]
    missed = [name for name, _v, field, words in cases if not any(field in p and words in p for p in problems)]
    return problems, missed


def test_every_bad_inventory_variable_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="mp-inv-", dir=SHORT_TMP_ROOT))
    try:
        with VkeLabContext(tmp_path, tmp, api_key=API_KEY) as lab:
            runs = [
                run_playbook(
                    SITE,
                    inventory=inventory(tmp_path / f"inventory-{index}", cases),
                    env=lab.env(),
                    extra_vars={"reserved_networks": ["10.40.0.0/16"]},
                    limit="vke_clusters",
                    timeout=600,
                )
                for index, cases in enumerate((SHAPE, PLATFORM))
            ]
            vultr_writes = [e for e in lab.vultr.log.entries if e["method"] != "GET"]
            mp_writes = [r for r in lab.mp.api.requests if r.method not in ("GET", "HEAD")]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    (shape_problems, shape_missed), (platform_problems, platform_missed) = (
        refused(runs[0], SHAPE),
        refused(runs[1], PLATFORM),
    )
    record(
        "bad_input_inventory",
        {
            "cases": len(SHAPE) + len(PLATFORM),
            "refused naming the field": len(SHAPE) + len(PLATFORM) - len(shape_missed) - len(platform_missed),
            "Vultr writes": len(vultr_writes),
            "control-plane writes": len(mp_writes),
        },
        "two site.yml runs over inventories of VKE clusters each wrong in one way (the rules, then the Vultr "
        "catalogue's facts); a case counts as refused when a preflight problem names its cluster or field and value; "
        "writes counted on the emulators",
    )
    assert shape_missed == [], "\n".join(shape_problems)
    assert platform_missed == [], "\n".join(platform_problems)
    assert vultr_writes == []
    assert mp_writes == []
