"""Benchmark of playbooks/site.yml end to end on the lab twin: wall time of up, no-op re-run and down.

For 1 and for 10 clusters (each with an A16 and an L40S pool, as inventories/lab), forks 10, twin
delays at 0, so the figures are the collection's own cost (module start-ups, API round trips, waits
that poll) and not the platform's. Each cluster count gets a fresh lab (``labctl up``) and an
inventory generated from inventories/lab with N hosts. Also recorded: the task count per run and the
Vultr requests (from the emulator's log), so a regression in either shows up next to the time.

Also recorded per run: the CPU seconds of the controller (``ansible-playbook`` and everything it started) and of
the lab's emulators, which share the machine's cores at delay 0, and the controller's peak memory
(``proc_usage.py``). ``--no-op-forks 10 25`` runs the no-op once per fork count.

Run: ``PYTHONPATH=tests .venv/bin/python -m bench.bench_site [--clusters 1 10 40] [--no-op-forks 10 25]
[--json out.json]``.
Not collected by pytest (``bench_*.py``); tests never assert on wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
import yaml

REPO = Path(__file__).resolve().parents[2]

from bench import proc_usage
from lab.common.emulator import lab_command, lab_environment
from support.collection import ansible_env

LAB_INVENTORY = REPO / "inventories" / "lab"
FORKS = 10


# The lab's BMCs, each with a simulated server behind it (2x V100), in the order a mixed inventory uses them.
LAB_BMCS = ("r730-1", "r740-1", "gen-1")


def write_inventory(directory: Path, clusters: int, metal: int = 0) -> Path:
    """inventories/lab with ``clusters`` clusters: ``metal`` bare-metal ones (each on a pool of one lab BMC, with
    its own networks and LoadBalancer range), the rest VKE clusters like the lab's one (own name and network)."""
    if not 0 <= metal <= min(clusters, len(LAB_BMCS)):
        raise SystemExit(f"--metal must be 0 to {min(clusters, len(LAB_BMCS))} (the lab has {len(LAB_BMCS)} BMCs)")
    shutil.copytree(LAB_INVENTORY / "group_vars", directory / "group_vars")
    lab = yaml.safe_load((LAB_INVENTORY / "hosts.yml").read_text())
    children = lab["all"]["children"]
    template = next(iter(children["vke_clusters"]["hosts"].values()))
    children["vke_clusters"]["hosts"] = {
        f"bench-{index:02d}": {**template, "cluster_networks": [f"10.{40 + index}.0.0/20"]}
        for index in range(clusters - metal)
    }
    metal_template = next(iter(children["metal_clusters"]["hosts"].values()))
    children.pop("pool_lab", None)
    children["metal_clusters"]["hosts"] = {}
    for index, bmc in enumerate(LAB_BMCS[:metal]):
        # A pool of one BMC per cluster: the node address the cluster writes is that host's.
        pool = "bench_" + bmc.replace("-", "_")
        children[f"pool_{pool}"] = {"hosts": {bmc: None}}
        shutil.copy(LAB_INVENTORY / "group_vars" / "pool_lab.yml", directory / "group_vars" / f"pool_{pool}.yml")
        cluster = {
            key: str(value).replace("r730-1", bmc) if isinstance(value, str) else value
            for key, value in metal_template.items()
        }
        cluster["baremetal_host_dns"] = [cluster["baremetal_host_gateway"]]
        cluster.update(
            baremetal_host_pool=pool,
            cluster_networks=[f"10.{100 + 2 * index}.0.0/16", f"10.{101 + 2 * index}.0.0/16"],
            kubeadm_node_lb_pool=[f"127.77.0.{200 + 10 * index}-127.77.0.{209 + 10 * index}"],
        )
        children["metal_clusters"]["hosts"][f"metal-{bmc}"] = cluster
    if not metal:
        children.pop("metal_clusters")
    (directory / "hosts.yml").write_text(yaml.safe_dump(lab, sort_keys=False))
    return directory


def vultr_requests(state_dir: Path) -> int:
    endpoints = yaml.safe_load((state_dir / "endpoints.yml").read_text())
    url = endpoints["emulators"]["vultr"]["api_endpoint"] + "/lab/requests"
    return int(requests.get(url, timeout=10).json()["counters"].get("total", 0))


def lab_pids(state_dir: Path) -> list[int]:
    """The lab's emulator processes (labctl's record)."""
    return [int(entry["pid"]) for entry in json.loads((state_dir / "processes.json").read_text())]


def run_site(playbook: str, inventory: Path, state_dir: Path, forks: int = FORKS) -> dict[str, Any]:
    env = ansible_env(LAB_STATE_DIR=str(state_dir), ANSIBLE_FORKS=str(forks))
    before = vultr_requests(state_dir)
    lab = proc_usage.tree(lab_pids(state_dir))
    lab_cpu = proc_usage.cpu_seconds(lab)
    controller_cpu = proc_usage.children_cpu_seconds()
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), f"playbooks/{playbook}"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with proc_usage.PeakRss(proc.pid) as memory:
        stdout, stderr = proc.communicate()
    seconds = time.monotonic() - started
    controller_cpu = proc_usage.children_cpu_seconds() - controller_cpu
    lab_cpu = proc_usage.cpu_seconds(lab) - lab_cpu
    if proc.returncode != 0:
        sys.stderr.write(stdout[-6000:] + stderr[-3000:])
        raise SystemExit(f"{playbook} failed (rc {proc.returncode})")
    recap = [line for line in stdout.splitlines() if " : ok=" in line]
    changed = sum(int(line.split("changed=")[1].split()[0]) for line in recap)
    tasks = sum(int(line.split("ok=")[1].split()[0]) for line in recap)
    return {
        "seconds": round(seconds, 1),
        "forks": forks,
        "changed": changed,
        "tasks_ok": tasks,
        "vultr_requests": vultr_requests(state_dir) - before,
        # CPU seconds of ansible-playbook and everything it started, and of the lab's emulators meanwhile.
        "controller_cpu_seconds": round(controller_cpu, 1),
        # Of which ansible-playbook's main process (last sample before it exited: a lower bound).
        "controller_main_cpu_seconds": round(memory.own_cpu, 1),
        "lab_cpu_seconds": round(lab_cpu, 1),
        # The largest sum of RSS of ansible-playbook and its descendants at one sample.
        "controller_peak_rss_mb": round(memory.peak / 2**20),
        # The same moment's memory without double counting the pages the forks share (proportional set size).
        "controller_peak_pss_mb": round(memory.peak_pss / 2**20),
        "controller_peak_processes": memory.processes,
    }


@contextmanager
def bench_lab(clusters: int, metal: int = 0) -> Iterator[tuple[Path, Path, Path]]:
    """A fresh lab at delay 0 with an inventory of ``clusters`` clusters (``metal`` of them bare metal): (work
    directory, inventory, state dir)."""
    with tempfile.TemporaryDirectory(prefix="mp-bench-") as tmp:
        state_dir = Path(tmp) / "state"
        inventory = write_inventory(Path(tmp) / "inventory", clusters, metal)
        labctl = lab_command("lab.labctl")
        env = lab_environment()
        subprocess.run([*labctl, "up", "--state-dir", str(state_dir), "--delay-scale", "0"], check=True, env=env)
        try:
            yield Path(tmp), inventory, state_dir
        finally:
            subprocess.run([*labctl, "down", "--state-dir", str(state_dir)], check=False, env=env)


def bench(clusters: int, no_op_forks: list[int], metal: int = 0) -> dict[str, Any]:
    """Up and down at ``FORKS``; the no-op once per entry of ``no_op_forks`` (the first is the table's)."""
    with bench_lab(clusters, metal) as (_work, inventory, state_dir):
        up = run_site("site.yml", inventory, state_dir)
        no_ops = [run_site("site.yml", inventory, state_dir, forks) for forks in no_op_forks]
        down = run_site("down.yml", inventory, state_dir)
    return {
        "clusters": clusters,
        "metal": metal,
        "forks": FORKS,
        "up": up,
        "no_op": no_ops[0],
        "no_ops": no_ops,
        "down": down,
    }


def label(result: dict[str, Any]) -> str:
    metal = result.get("metal") or 0
    return f"{result['clusters']} ({metal} metal)" if metal else str(result["clusters"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, nargs="+", default=[1, 10])
    parser.add_argument(
        "--no-op-forks", type=int, nargs="+", default=[FORKS], help="forks of each no-op run (up and down: 10)"
    )
    parser.add_argument(
        "--metal", type=int, default=0, help="of each count, this many bare-metal clusters (one per lab BMC, at most 3)"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.chdir(REPO)
    results = []
    for n in args.clusters:
        results.append(bench(n, args.no_op_forks, min(args.metal, n)))
        if args.json:  # after each count, so a long run leaves what it measured
            args.json.write_text(json.dumps(results, indent=2))
    print(
        "| clusters | up s | no-op s (changed) | down s | Vultr requests up / no-op / down "
        "| no-op CPU s controller / lab | peak PSS MB up / no-op / down |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        up, no_op, down = r["up"], r["no_op"], r["down"]
        print(
            f"| {label(r)} | {up['seconds']} | {no_op['seconds']} ({no_op['changed']}) | {down['seconds']} "
            f"| {up['vultr_requests']} / {no_op['vultr_requests']} / {down['vultr_requests']} "
            f"| {no_op['controller_cpu_seconds']} / {no_op['lab_cpu_seconds']} "
            f"| {up['controller_peak_pss_mb']} / {no_op['controller_peak_pss_mb']} / {down['controller_peak_pss_mb']} |"
        )
        for extra in r["no_ops"][1:]:
            print(
                f"|   no-op at forks {extra['forks']} | | {extra['seconds']} ({extra['changed']}) | | | "
                f"{extra['controller_cpu_seconds']} / {extra['lab_cpu_seconds']} | {extra['controller_peak_pss_mb']} |"
            )


if __name__ == "__main__":
    main()
