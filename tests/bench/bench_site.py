"""Benchmark of playbooks/site.yml end to end on the lab twin: wall time of up, no-op re-run and down.

For 1 and for 10 clusters (each with an A16 and an L40S pool, as inventories/lab), forks 10, twin
delays at 0, so the figures are the collection's own cost (module start-ups, API round trips, waits
that poll) and not the platform's. Each cluster count gets a fresh lab (``labctl up``) and an
inventory generated from inventories/lab with N hosts. Also recorded: the task count per run and the
Vultr requests (from the emulator's log), so a regression in either shows up next to the time.

Run: ``PYTHONPATH=tests .venv/bin/python -m bench.bench_site [--clusters 1 10] [--json out.json]``.
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

from lab.common.emulator import lab_command, lab_environment
from support.collection import ansible_env

LAB_INVENTORY = REPO / "inventories" / "lab"
FORKS = 10


def write_inventory(directory: Path, clusters: int) -> Path:
    """inventories/lab with ``clusters`` hosts, each like the lab's one (own name and network)."""
    shutil.copytree(LAB_INVENTORY / "group_vars", directory / "group_vars")
    lab = yaml.safe_load((LAB_INVENTORY / "hosts.yml").read_text())
    template = next(iter(lab["all"]["children"]["vke_clusters"]["hosts"].values()))
    hosts = {
        f"bench-{index:02d}": {**template, "cluster_networks": [f"10.{40 + index}.0.0/20"]} for index in range(clusters)
    }
    lab["all"]["children"]["vke_clusters"]["hosts"] = hosts
    # The VKE path only (as before the bare-metal clusters joined the lab inventory).
    lab["all"]["children"].pop("metal_clusters", None)
    lab["all"]["children"].pop("pool_lab", None)
    (directory / "hosts.yml").write_text(yaml.safe_dump(lab, sort_keys=False))
    return directory


def vultr_requests(state_dir: Path) -> int:
    endpoints = yaml.safe_load((state_dir / "endpoints.yml").read_text())
    url = endpoints["emulators"]["vultr"]["api_endpoint"] + "/lab/requests"
    return int(requests.get(url, timeout=10).json()["counters"].get("total", 0))


def run_site(playbook: str, inventory: Path, state_dir: Path) -> dict[str, Any]:
    env = ansible_env(LAB_STATE_DIR=str(state_dir), ANSIBLE_FORKS=str(FORKS))
    before = vultr_requests(state_dir)
    started = time.monotonic()
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), f"playbooks/{playbook}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-6000:] + proc.stderr[-3000:])
        raise SystemExit(f"{playbook} failed (rc {proc.returncode})")
    recap = [line for line in proc.stdout.splitlines() if " : ok=" in line]
    changed = sum(int(line.split("changed=")[1].split()[0]) for line in recap)
    tasks = sum(int(line.split("ok=")[1].split()[0]) for line in recap)
    return {
        "seconds": round(seconds, 1),
        "changed": changed,
        "tasks_ok": tasks,
        "vultr_requests": vultr_requests(state_dir) - before,
    }


@contextmanager
def bench_lab(clusters: int) -> Iterator[tuple[Path, Path, Path]]:
    """A fresh lab at delay 0 with an inventory of ``clusters`` clusters: (work directory, inventory, state dir)."""
    with tempfile.TemporaryDirectory(prefix="mp-bench-") as tmp:
        state_dir = Path(tmp) / "state"
        inventory = write_inventory(Path(tmp) / "inventory", clusters)
        labctl = lab_command("lab.labctl")
        env = lab_environment()
        subprocess.run([*labctl, "up", "--state-dir", str(state_dir), "--delay-scale", "0"], check=True, env=env)
        try:
            yield Path(tmp), inventory, state_dir
        finally:
            subprocess.run([*labctl, "down", "--state-dir", str(state_dir)], check=False, env=env)


def bench(clusters: int) -> dict[str, Any]:
    with bench_lab(clusters) as (_work, inventory, state_dir):
        up = run_site("site.yml", inventory, state_dir)
        again = run_site("site.yml", inventory, state_dir)
        down = run_site("down.yml", inventory, state_dir)
    return {"clusters": clusters, "forks": FORKS, "up": up, "no_op": again, "down": down}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.chdir(REPO)
    results = [bench(n) for n in args.clusters]
    print("| clusters | up s | no-op s (changed) | down s | Vultr requests up / no-op / down |")
    print("|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['clusters']} | {r['up']['seconds']} | {r['no_op']['seconds']} ({r['no_op']['changed']}) "
            f"| {r['down']['seconds']} | {r['up']['vultr_requests']} / {r['no_op']['vultr_requests']} "
            f"/ {r['down']['vultr_requests']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
