"""vke_preflight through ansible-playbook against the VKE emulator: read-only, every problem at once."""

from __future__ import annotations

from typing import Any

from lab.vultr.server import VultrEmulator

L40S = "vcg-l40s-16c-180g-48vram"
A16 = "vcg-a16-6c-64g-16vram"


def inventory(count: int, **pool: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": f"ewr-{index}",
            "region": "ewr",
            "networks": [f"10.{40 + index}.0.0/20"],
            "gpu_pools": [
                {"name": "l40s-1x", "plan": L40S, "gpu": {"type": "L40S", "count": 1}, "node_quantity": 1, **pool},
                {"name": "a16-1x", "plan": A16, "gpu": {"type": "A16", "count": 1}, "node_quantity": 1},
            ],
        }
        for index in range(count)
    ]


def test_sound_inventory_passes_with_a_fixed_number_of_reads(vplay: Any, emu: VultrEmulator) -> None:
    results = {}
    for count in (1, 10):
        run = vplay([{"name": "preflight", "metalplane.inference.vke_preflight": {"clusters": inventory(count)}}])
        results[count] = run.task("preflight")
        assert run.rc == 0, run.stdout[-3000:]
    one, ten = results[1], results[10]
    assert not one["changed"]
    assert [p["gpus_per_node"] for p in one["clusters"][0]["gpu_pools"]] == [1, 1]
    assert one["clusters"][0]["version"].startswith("v1.")
    assert len(ten["clusters"]) == 10
    # ten clusters in one region cost no more requests than one: the checks are per inventory
    assert ten["api_requests"]["total"] == one["api_requests"]["total"]
    assert set(one["api_requests"]["by_method"]) == {"GET"}
    assert {r["method"] for r in emu.requests} == {"GET"}


def test_bad_inventory_lists_every_problem_and_creates_nothing(vplay: Any, emu: VultrEmulator) -> None:
    clusters = inventory(2, node_quantity=5, max_nodes=2)
    clusters[1]["region"] = "mars"
    clusters[1]["networks"] = ["10.40.0.0/16"]
    run = vplay([{"name": "preflight", "metalplane.inference.vke_preflight": {"clusters": clusters}}])
    result = run.task("preflight")
    assert result["failed"]
    fields = {p["field"] for p in result["error"]["problems"]}
    assert {"ewr-0.gpu_pools[l40s-1x].node_quantity", "ewr-1.networks"} <= fields
    assert "nothing was created" in result["msg"]
    assert {r["method"] for r in emu.requests} <= {"GET"}
    # the region is a platform fact: it is checked once the inventory's shape is sound
    clusters = inventory(2)
    clusters[1]["region"] = "mars"
    clusters[0]["gpu_pools"][0]["gpu"]["count"] = 2
    result = vplay([{"name": "preflight", "metalplane.inference.vke_preflight": {"clusters": clusters}}]).task(
        "preflight"
    )
    fields = {p["field"] for p in result["error"]["problems"]}
    assert fields == {"ewr-1.region", "ewr-0.gpu_pools[l40s-1x].gpu.count"}


def test_rejected_api_key_is_a_problem_not_a_crash(vplay: Any) -> None:
    run = vplay(
        [{"name": "preflight", "metalplane.inference.vke_preflight": {"clusters": inventory(1)}}],
        env={"VULTR_API_KEY": "not-the-key"},
    )
    result = run.task("preflight")
    assert result["failed"]
    assert [p["field"] for p in result["error"]["problems"]] == ["api_key"]
    assert "not-the-key" not in run.stdout + run.stderr
