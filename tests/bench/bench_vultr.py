"""Benchmark of the VKE modules against the emulator: API requests and wall time.

Scenarios (each one real ``ansible-playbook`` run of ``vke_cluster`` with two GPU pools in ``node_pools``):
(a) a new cluster with two GPU pools, (b) a no-op re-run, (c) teardown. Also measured: the
shortest interval between two polls of the same object during the waits (target: >= 2 s).

Run: ``.venv/bin/python tests/bench/bench_vultr.py [--delay-scale 0.2] [--write docs/benchmarks/vultr.md]``.
Not collected by pytest (``bench_*.py``); tests never assert on wall time.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
sys.path[0] = str(TESTS)  # import as ``lab.*``/``support.*``; never shadow vultr-python

from lab.vultr import VultrEmulator
from support.collection import install_collection_finder
from support.playbook import run_playbook

install_collection_finder()

POOLS = [
    {"label": "gpu-l40s", "plan": "vcg-l40s-16c-180g-48vram", "node_quantity": 1, "max_nodes": 3},
    {"label": "gpu-a16", "plan": "vcg-a16-6c-64g-16vram", "node_quantity": 2},
]


def cluster_task(state: str, kubeconfig: Path) -> dict[str, Any]:
    options: dict[str, Any] = {"label": "bench", "state": state}
    if state == "present":
        options.update(region="ewr", version="1.36", node_pools=POOLS, kubeconfig_path=str(kubeconfig))
    return {"name": "vke", "metalplane.inference.vke_cluster": options}


def poll_gaps(entries: list[dict[str, Any]]) -> list[float]:
    """Gaps between consecutive GETs of the same single object (cluster or pool) = wait polls."""
    last: dict[str, float] = {}
    gaps: list[float] = []
    for entry in entries:
        path = entry["path"]
        if entry["method"] != "GET" or not re.search(r"/kubernetes/clusters/[^/]+(/node-pools/[^/]+)?$", path):
            continue
        if path in last:
            gaps.append(entry["timestamp"] - last[path])
        last[path] = entry["timestamp"]
    return gaps


def scenario(emu: VultrEmulator, name: str, task: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    before = len(emu.requests)
    start = time.monotonic()
    run = run_playbook([task], env=env)
    wall = time.monotonic() - start
    if run.rc != 0:
        raise SystemExit(f"{name} failed: {run.stdout[-2000:]}")
    entries = emu.requests[before:]
    result = run.task("vke")
    gaps = poll_gaps(entries)
    return {
        "name": name,
        "requests": len(entries),
        "by_method": {m: sum(1 for e in entries if e["method"] == m) for m in ("GET", "POST", "PATCH", "DELETE")},
        "client_total": result["api_requests"]["total"],
        "wall": wall,
        "changed": result["changed"],
        "min_poll_gap": min(gaps) if gaps else None,
        "polls": len(gaps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-scale", type=float, default=0.2, help="emulator delay scale (1 = 30 s cluster)")
    parser.add_argument("--write", type=Path, help="write the Markdown report here")
    args = parser.parse_args()
    tmp = Path("/tmp") / f"bench-vultr-{time.time_ns()}"
    tmp.mkdir()
    rows = []
    with VultrEmulator(delay_scale=args.delay_scale) as emu:
        env = {"VULTR_API_KEY": emu.api_key, "VULTR_API_ENDPOINT": emu.endpoint}
        kubeconfig = tmp / "bench.kubeconfig"
        rows.append(scenario(emu, "(a) new cluster + 2 GPU pools", cluster_task("present", kubeconfig), env))
        rows.append(scenario(emu, "(b) no-op re-run", cluster_task("present", kubeconfig), env))
        rows.append(scenario(emu, "(c) teardown", cluster_task("absent", kubeconfig), env))
    lines = [
        "# Vultr VKE modules: benchmark",
        "",
        f"Measured with `tests/bench/bench_vultr.py --delay-scale {args.delay_scale}` against the in-process VKE",
        f"emulator (cluster {30 * args.delay_scale:g} s, node {20 * args.delay_scale:g} s, delete"
        f" {5 * args.delay_scale:g} s to settle), one `ansible-playbook` run per scenario on a shared 2-core machine.",
        "One `vke_cluster` task with a system pool and two GPU pools (`node_pools`) and `kubeconfig_path`.",
        "",
        "| scenario | changed | API requests (emulator log) | by method | client count | wall time | polls"
        " | shortest gap between polls |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        methods = ", ".join(f"{k} {v}" for k, v in row["by_method"].items() if v)
        gap = f"{row['min_poll_gap']:.2f} s" if row["min_poll_gap"] is not None else "n/a"
        lines.append(
            f"| {row['name']} | {row['changed']} | {row['requests']} | {methods} | {row['client_total']} |"
            f" {row['wall']:.1f} s | {row['polls']} | {gap} |"
        )
    lines += [
        "",
        "Targets: a no-op re-run costs at most 2 requests per cluster whatever the number of pools (one",
        "`GET /kubernetes/clusters`, which embeds the pools, plus `GET .../config` for the kubeconfig); waits poll",
        "no more than once every 2 s (`Backoff(initial=2, floor=2, cap=10)`), so an `active` state is noticed",
        "within one poll interval (at most 10 s). Wall time includes ~2 s of ansible-playbook start-up.",
    ]
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if args.write:
        args.write.write_text(report)


if __name__ == "__main__":
    main()
