"""Benchmark of the VKE modules against the emulator: API requests and wall time.

Scenarios (each one real ``ansible-playbook`` run of ``vke_cluster`` with two GPU pools in ``node_pools``):
(a) a new cluster with two GPU pools, (b) a no-op re-run, (c) teardown. Also measured: the
shortest interval between two polls of the same object during the waits (target: >= 2 s); how
late each wait of (a) noticed ``active`` (the instant the emulator made the object ready, from its
own schedule, against the first poll that saw it: target within one poll interval); and the cost
of a no-op re-run with ``version: latest`` (and ``1.36``) for 0, 2 and 6 GPU pools (target: at
most 2 requests whatever the number of pools).

Run: ``PYTHONPATH=tests .venv/bin/python -m bench.bench_vultr [--delay-scale 0.2] [--write docs/benchmarks/vultr.md]``.
Not collected by pytest (``bench_*.py``); tests never assert on wall time.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

from lab.vultr.contract import VultrContract, overlay_available
from lab.vultr.server import VultrEmulator
from support.collection import install_collection_finder
from support.playbook import run_playbook

install_collection_finder()

POOLS = [
    {"label": "gpu-l40s", "plan": "vcg-l40s-16c-180g-48vram", "node_quantity": 1, "max_nodes": 3},
    {"label": "gpu-a16", "plan": "vcg-a16-6c-64g-16vram", "node_quantity": 2},
]


NOOP_POOL_COUNTS = (0, 2, 6)
NOOP_VERSIONS = ("latest", "1.36")
# The waits' poll schedule (plugins/module_utils/_vultr/waits.py POLL_BACKOFF): the longest interval.
POLL_CAP = 10.0
SYSTEM_TAG = "metalplane.inference/cluster"  # the system pool's tag: the cluster's ownership marker


def cluster_task(
    state: str,
    kubeconfig: Path,
    *,
    label: str = "bench",
    version: str = "1.36",
    pools: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    options: dict[str, Any] = {"label": label, "state": state}
    if state == "present":
        options.update(
            region="ewr",
            version=version,
            node_pools=POOLS if pools is None else pools,
            kubeconfig_path=str(kubeconfig),
        )
    return {"name": "vke", "metalplane.inference.vke_cluster": options}


def contract() -> VultrContract | None:
    """Check the benchmark's exchanges too, when the shared spec is there (the figures mean nothing otherwise)."""
    return VultrContract() if overlay_available() else None


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


def ready_instants(emu: VultrEmulator, clock_offset: float) -> dict[str, float]:
    """When each object a wait watches became ready, on the request log's clock (``time.time``).

    Read from the emulator's own schedule: a cluster is ready when it and the nodes of the pools it had
    when its wait started (the system pool) are active; a pool when all its nodes are. ``clock_offset``
    maps the state's monotonic clock to wall time.
    """
    instants: dict[str, float] = {}
    with emu.state.lock:
        for cluster in emu.state.clusters.values():
            path = f"/v2/kubernetes/clusters/{cluster.id}"
            system = [p for p in cluster.node_pools if p.tag == SYSTEM_TAG]
            nodes = [n.ready_at for p in system for n in p.nodes]
            instants[path] = max([cluster.ready_at, *nodes]) + clock_offset
            for pool in cluster.node_pools:
                if pool.tag != SYSTEM_TAG and pool.nodes:
                    instants[f"{path}/node-pools/{pool.id}"] = max(n.ready_at for n in pool.nodes) + clock_offset
    return instants


def noticed(entries: list[dict[str, Any]], instants: dict[str, float], start: float) -> list[dict[str, Any]]:
    """Per waited object: ready at, first poll after it, the delay and the poll interval it fell in."""
    rows = []
    for path, ready in instants.items():
        polls = [e["timestamp"] for e in entries if e["method"] == "GET" and e["path"] == path]
        after = [t for t in polls if t >= ready]
        before = [t for t in polls if t < ready]
        if not after or not before:
            continue  # never waited on (ready before the first read)
        seen, previous = after[0], before[-1]
        rows.append(
            {
                "object": "cluster" if "/node-pools/" not in path else "pool " + path.rsplit("/", 1)[-1][:8],
                "ready": ready - start,
                "seen": seen - start,
                "delay": seen - ready,
                "interval": seen - previous,
            }
        )
    return sorted(rows, key=lambda row: row["ready"])


def noop_costs(tmp: Path) -> list[dict[str, Any]]:
    """Requests of a no-op re-run per ``version`` form and number of GPU pools (delays 0: only counts matter)."""
    rows = []
    with VultrEmulator(delay_scale=0.0, contract=contract()) as emu:
        env = {"VULTR_API_KEY": emu.api_key, "VULTR_API_ENDPOINT": emu.endpoint}
        for count in NOOP_POOL_COUNTS:
            pools = [{"label": f"gpu-{i}", "plan": POOLS[0]["plan"], "node_quantity": 1} for i in range(count)]
            label = f"noop-{count}"
            kubeconfig = tmp / f"{label}.kubeconfig"
            create = cluster_task("present", kubeconfig, label=label, version=NOOP_VERSIONS[0], pools=pools)
            created = run_playbook([create], env=env)
            if created.rc != 0:
                raise SystemExit(f"creating {label} failed: {created.stdout[-2000:]}")
            for version in NOOP_VERSIONS:
                task = cluster_task("present", kubeconfig, label=label, version=version, pools=pools)
                row = scenario(emu, f"no-op, version {version}, {count} GPU pools", task, env)
                row.update(pools=count, version=version)
                rows.append(row)
        violations = len(emu.contract_violations) if emu.contract is not None else None
    for row in rows:
        row["violations"] = violations
    return rows


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
        "paths": [f"{e['method']} {re.sub(r'[0-9a-f-]{36}', '{id}', e['path'])}" for e in entries],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-scale", type=float, default=0.2, help="emulator delay scale (1 = 30 s cluster)")
    parser.add_argument("--write", type=Path, help="write the Markdown report here")
    args = parser.parse_args()
    tmp = Path("/tmp") / f"bench-vultr-{time.time_ns()}"
    tmp.mkdir()
    rows = []
    with VultrEmulator(delay_scale=args.delay_scale, contract=contract()) as emu:
        clock_offset = time.time() - emu.state.clock()
        env = {"VULTR_API_KEY": emu.api_key, "VULTR_API_ENDPOINT": emu.endpoint}
        kubeconfig = tmp / "bench.kubeconfig"
        start = time.time()
        rows.append(scenario(emu, "(a) new cluster + 2 GPU pools", cluster_task("present", kubeconfig), env))
        waits = noticed(emu.requests, ready_instants(emu, clock_offset), start)
        rows.append(scenario(emu, "(b) no-op re-run", cluster_task("present", kubeconfig), env))
        rows.append(scenario(emu, "(c) teardown", cluster_task("absent", kubeconfig), env))
        violations = len(emu.contract_violations) if emu.contract is not None else None
    noops = noop_costs(tmp)
    checked = "every exchange checked against the Vultr overlay spec" if violations is not None else "no contract check"
    lines = [
        "# Vultr VKE modules: benchmark",
        "",
        f"Measured with `tests/bench/bench_vultr.py --delay-scale {args.delay_scale}` against the in-process VKE",
        f"emulator (cluster {30 * args.delay_scale:g} s, node {20 * args.delay_scale:g} s, delete"
        f" {5 * args.delay_scale:g} s to settle), one `ansible-playbook` run per scenario on a shared 2-core machine",
        f"({checked}; contract violations: {violations if violations is not None else 'n/a'}).",
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
        "",
        "## A wait notices `active` within one poll interval",
        "",
        "Each wait of scenario (a): when the emulator made the object ready (its own schedule: the cluster",
        "with its system pool's nodes, or every node of a pool), when the first poll of that object after",
        "that instant ran (request log), the delay between the two, and the poll interval that instant fell",
        "in (previous poll to that poll). Seconds from the start of the run. The target holds when every",
        f"delay is at most its interval and every interval at most {POLL_CAP:g} s (the cap).",
        "",
        "| object | ready at | seen by the poll at | delay | poll interval | within one interval |",
        "|---|---|---|---|---|---|",
    ]
    for wait in waits:
        ok = wait["delay"] <= wait["interval"] <= POLL_CAP
        lines.append(
            f"| {wait['object']} | {wait['ready']:.2f} s | {wait['seen']:.2f} s | {wait['delay']:.2f} s |"
            f" {wait['interval']:.2f} s | {'yes' if ok else '**no**'} |"
        )
    if not waits:
        lines.append("| (no wait saw a pending object) | | | | | |")
    noop_violations = noops[0]["violations"] if noops else None
    lines += [
        "",
        "## No-op re-run cost by `version` and number of pools",
        "",
        "One cluster per pool count (system pool plus 0, 2 or 6 GPU pools, created with `version: latest`),",
        "then a re-run with `version: latest` and one with `version: 1.36` (both resolve to the newest",
        "v1.36 patch), with `kubeconfig_path`; delays 0 (only the counts matter). Contract violations:"
        f" {noop_violations if noop_violations is not None else 'n/a'}.",
        "Before commit 4f5f94c a re-run with `version: latest` also read `GET .../available-upgrades`:",
        "3 requests for every pool count (measured with this script at be0ee5a).",
        "",
        "| version | GPU pools | changed | API requests | requests | target (<= 2) |",
        "|---|---|---|---|---|---|",
    ]
    for row in noops:
        ok = row["requests"] <= 2 and not row["changed"]
        lines.append(
            f"| `{row['version']}` | {row['pools']} | {row['changed']} | {row['requests']} |"
            f" {', '.join(row['paths'])} | {'met' if ok else '**not met**'} |"
        )
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if args.write:
        args.write.write_text(report)


if __name__ == "__main__":
    main()
