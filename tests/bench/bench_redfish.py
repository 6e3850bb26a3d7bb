"""Benchmark: HTTP requests and wall time of the Redfish modules vs community.general.redfish_command.

Run: ``PYTHONPATH=tests .venv/bin/python -m bench.bench_redfish [--rounds N] [--json out.json]``

For each personality of the lab emulator (``lab.redfish.server``, delay scale 0, each BMC on its own port
so that community.general, which only takes ``host[:port]``, can address it) and each operation:

* power-on from Off: ``redfish_power state=on`` (waits until On) vs ``redfish_command PowerOn``;
* one-time virtual-CD boot: ``redfish_boot device=virtual_cd`` vs ``redfish_command SetOneTimeBoot
  bootdevice=Cd`` (on iDRAC8 the anchor's ``Cd`` boots the *physical* drive: not the same result);
* media insert into the CD slot: ``redfish_virtual_media state=inserted`` (verifies ``Inserted``)
  vs ``redfish_command VirtualMediaInsert`` (category Manager on iDRAC8, Systems elsewhere).

``metalplane`` runs with the default ``auth: basic``; ``metalplane auth=session`` is the same task
with ``auth: session`` (one Redfish session opened and deleted per task, two more requests).
Requests are counted on the emulator's side (every exchange, auth included), the same way for
all; wall time is the task duration from ansible's JSON callback (module start-up included),
the median over the rounds. The state is reset before every run (power Off, media ejected).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from integration.redfish.images import ImageServer

from lab.redfish.server import BmcSpec, RedfishLab
from support.collection import install_collection_finder
from support.playbook import run_playbook

PERSONALITIES = ("idrac8", "idrac9", "generic")
OPERATIONS = ("power_on", "virtual_cd_once", "media_insert")


TOOLS = ("metalplane", "metalplane auth=session", "community.general")


def _ours(op: str, url: str, ca: str, iso: str, auth: str = "basic") -> dict[str, Any]:
    conn = {"bmc_url": url, "username": "root", "password": "calvin", "ca_cert": ca, "auth": auth}
    if op == "power_on":
        return {"metalplane.inference.redfish_power": {**conn, "state": "on"}}
    if op == "virtual_cd_once":
        return {"metalplane.inference.redfish_boot": {**conn, "device": "virtual_cd"}}
    return {"metalplane.inference.redfish_virtual_media": {**conn, "state": "inserted", "image_url": iso}}


def _anchor(op: str, url: str, ca: str, iso: str, personality: str) -> dict[str, Any]:
    conn = {"baseuri": url.removeprefix("https://"), "username": "root", "password": "calvin", "ca_path": ca}
    if op == "power_on":
        return {"community.general.redfish_command": {**conn, "category": "Systems", "command": "PowerOn"}}
    if op == "virtual_cd_once":
        args = {**conn, "category": "Systems", "command": "SetOneTimeBoot", "bootdevice": "Cd"}
        return {"community.general.redfish_command": args}
    category = "Manager" if personality == "idrac8" else "Systems"
    media = {"image_url": iso, "media_types": ["CD", "DVD"], "inserted": True, "write_protected": True}
    args = {**conn, "category": category, "command": "VirtualMediaInsert", "virtual_media": media}
    return {"community.general.redfish_command": args}


def _reset_state(lab: RedfishLab, name: str) -> None:
    state = lab.bmc(name)
    with state.lock:
        state._steps = []
        state._power = "Off"
        state.override_target, state.override_enabled = "None", "Disabled"
        for slot in state.slots.values():
            slot.inserted, slot.image = False, None
        state.sessions.clear()


def _seconds(task: dict[str, Any]) -> float:
    d = task["task"]["duration"]

    def parse(s: str) -> datetime.datetime:
        return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))

    return (parse(d["end"]) - parse(d["start"])).total_seconds()


def measure(lab: RedfishLab, name: str, task: dict[str, Any]) -> tuple[int, float, dict[str, Any]]:
    _reset_state(lab, name)
    before = len(lab.bmc(name).requests)
    run = run_playbook([{"name": "bench", **task}])
    tasks = run.report["plays"][0]["tasks"]
    result = tasks[0]["hosts"]["localhost"]
    if result.get("failed"):
        raise SystemExit(f"{name}: {json.dumps(task)[:300]} failed: {result.get('msg')}")
    return len(lab.bmc(name).requests) - before, _seconds(tasks[0]), result


def verified(op: str, lab: RedfishLab, name: str) -> bool:
    """Did the operation's effect hold on the BMC right after the task (emulator-side check)?"""
    state = lab.bmc(name)
    if op == "power_on":
        return state.power_state == "On"
    if op == "media_insert":
        return any(s.inserted for s in state.slots.values())
    return bool(state.scp_boot) or state.override_target == "Cd"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    install_collection_finder()
    rows: list[dict[str, Any]] = []
    images = ImageServer().start()
    lab = RedfishLab([BmcSpec(name=p, personality=p, port=0) for p in PERSONALITIES], delay_scale=0.0).start()
    try:
        for personality in PERSONALITIES:
            url = lab.port_url(personality)
            for op in OPERATIONS:
                for tool in TOOLS:
                    task = (
                        _ours(op, url, lab.ca_path, images.url(), "session" if "session" in tool else "basic")
                        if tool.startswith("metalplane")
                        else _anchor(op, url, lab.ca_path, images.url(), personality)
                    )
                    counts, times, checks = [], [], []
                    for _attempt in range(args.rounds):
                        n, seconds, _result = measure(lab, personality, task)
                        counts.append(n)
                        times.append(seconds)
                        checks.append(verified(op, lab, personality))
                    rows.append(
                        {
                            "personality": personality,
                            "operation": op,
                            "tool": tool,
                            "requests": statistics.median(counts),
                            "requests_min_max": [min(counts), max(counts)],
                            "seconds_median": round(statistics.median(times), 2),
                            "result_verified_by_module": tool.startswith("metalplane"),
                            "effect_on_bmc": all(checks),
                        }
                    )
                    sys.stdout.write(json.dumps(rows[-1]) + "\n")
    finally:
        lab.stop()
        images.stop()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
