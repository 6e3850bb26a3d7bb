"""Where a no-op ``site.yml`` run spends its time: a per-task profile split into module start-ups and the rest.

Why: on the lab at delay 0 the no-op run costs as much as the up run (docs/benchmarks/site.md), and the platform
waits are zero, so the time is the controller's. Before cutting anything, this says where it goes:

- every task of the no-op, from ansible.posix's JSON callback (its duration and action per host), grouped by role
  (the role is the phase: longhorn_rwx is storage, modelplane_adopt adoption...);
- the two costs every task pays whatever it does, measured in the same environment by a calibration playbook of
  ``CALIBRATION_TASKS`` tasks each: a controller-side task (``ansible.builtin.set_fact``) and a module run
  (``ansible.builtin.ping``: an AnsiballZ payload started in a new Python);
- so each module task splits into its start-up (the ping's cost) and the rest (its imports beyond ping's, API
  requests, waits); controller-side tasks (set_fact, assert, group_by, include_*) are counted apart.

Run (a lab of its own, one cluster, about 2 minutes here):
``PYTHONPATH=tests .venv/bin/python -m bench.profile_site [--clusters 1] [--markdown out.md]``.
Not collected by pytest; nothing asserts on its times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from bench.bench_site import FORKS, REPO, bench_lab
from support.collection import ansible_env

# Tasks the markdown lists, slowest first (the JSON has all of them).
SLOWEST_SHOWN = 15
# Actions that run in the controller's own process (action plugins with no module, and the strategy's own), so
# they pay no module start-up.
CONTROLLER_ACTIONS = frozenset(
    {
        "ansible.builtin.set_fact",
        "ansible.builtin.assert",
        "ansible.builtin.group_by",
        "ansible.builtin.add_host",
        "ansible.builtin.debug",
        "ansible.builtin.fail",
        "ansible.builtin.meta",
        "ansible.builtin.include_tasks",
        "ansible.builtin.include_role",
        "ansible.builtin.include_vars",
        "ansible.builtin.import_tasks",
        "ansible.builtin.validate_argument_spec",
        "set_fact",
        "assert",
        "group_by",
        "add_host",
        "debug",
        "fail",
        "meta",
        "include_tasks",
        "include_role",
        "validate_argument_spec",
    }
)
# Tasks per calibration play: enough that the per-task mean is stable to a few hundredths of a second.
CALIBRATION_TASKS = 20


@dataclass
class TaskTime:
    name: str
    action: str
    seconds: float
    runs: int  # action runs over every host: a loop runs the action once per item


def _runs(result: dict[str, Any]) -> int:
    items = result.get("results")
    if isinstance(items, list):
        return sum(1 for item in items if not item.get("skipped"))
    return 1


@dataclass
class Group:
    tasks: int = 0
    module_tasks: int = 0
    seconds: float = 0.0


def _seconds(duration: dict[str, str]) -> float:
    start = datetime.fromisoformat(duration["start"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(duration["end"].replace("Z", "+00:00"))
    return (end - start).total_seconds()


def json_run(playbook: Path, inventory: Path | str, env: dict[str, str]) -> dict[str, Any]:
    """A playbook run with the JSON callback: its report."""
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", str(inventory), str(playbook)],
        cwd=REPO,
        env={**env, "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-6000:] + proc.stderr[-3000:])
        raise SystemExit(f"{playbook.name} failed (rc {proc.returncode})")
    return json.loads(proc.stdout[proc.stdout.find("{") :])


def task_times(report: dict[str, Any]) -> list[TaskTime]:
    """Every task that ran on some host (skipped everywhere: not counted), in order."""
    times = []
    for play in report["plays"]:
        for task in play["tasks"]:
            ran = {host: result for host, result in task["hosts"].items() if not result.get("skipped")}
            if not ran:
                continue
            action = next(iter(ran.values())).get("action", "?")
            runs = sum(_runs(result) for result in ran.values())
            times.append(TaskTime(task["task"]["name"], action, _seconds(task["task"]["duration"]), runs))
    return times


def calibrate(directory: Path, env: dict[str, str]) -> dict[str, float]:
    """Seconds per task of a controller-side task and of a module run, on localhost, in this environment."""
    plays = [
        {
            "name": name,
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            # The interpreter the inventory's clusters run their modules with; discovery may find one that does not
            # start (a pyenv shim for a version not selected).
            "vars": {"ansible_python_interpreter": sys.executable},
            "tasks": [{"name": f"{name} {index}", **task} for index in range(CALIBRATION_TASKS)],
        }
        for name, task in (
            ("controller", {"ansible.builtin.set_fact": {"profile_probe": "{{ 1 }}"}}),
            ("module", {"ansible.builtin.ping": {}}),
        )
    ]
    playbook = directory / "calibrate.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    times = task_times(json_run(playbook, "localhost,", env))
    per_kind: dict[str, list[float]] = defaultdict(list)
    for time in times:
        per_kind[time.name.split()[0]].append(time.seconds)
    return {kind: sum(values) / len(values) for kind, values in per_kind.items()}


def role_of(name: str) -> str:
    """``metalplane.inference.longhorn_rwx : Wait ...`` -> ``longhorn_rwx``; a play's own task -> ``site.yml``."""
    if " : " in name:
        return name.split(" : ", 1)[0].rsplit(".", 1)[-1]
    return "site.yml"


def profile(clusters: int) -> dict[str, Any]:
    with bench_lab(clusters) as (work, inventory, state_dir):
        env = ansible_env(LAB_STATE_DIR=str(state_dir), ANSIBLE_FORKS=str(FORKS))
        up = json_run(REPO / "playbooks" / "site.yml", inventory, env)
        started = datetime.now()
        no_op = json_run(REPO / "playbooks" / "site.yml", inventory, env)
        wall = (datetime.now() - started).total_seconds()
        costs = calibrate(work, env)
        json_run(REPO / "playbooks" / "down.yml", inventory, env)
    times = task_times(no_op)
    changed = sum(stats.get("changed", 0) for stats in no_op["stats"].values())
    groups: dict[str, Group] = defaultdict(Group)
    for time in times:
        group = groups[role_of(time.name)]
        group.tasks += 1
        group.seconds += time.seconds
        group.module_tasks += time.runs if time.action not in CONTROLLER_ACTIONS else 0
    module_tasks = sum(group.module_tasks for group in groups.values())
    controller_tasks = sum(1 for time in times if time.action in CONTROLLER_ACTIONS)
    return {
        "clusters": clusters,
        "forks": FORKS,
        "up_tasks": len(task_times(up)),
        "no_op": {
            "wall_seconds": round(wall, 1),
            "changed": changed,
            "tasks_run": len(times),
            "module_tasks": module_tasks,
            "controller_tasks": controller_tasks,
            "task_seconds": round(sum(time.seconds for time in times), 1),
        },
        "calibration": {kind: round(value, 3) for kind, value in costs.items()},
        "groups": {
            name: {
                "tasks": group.tasks,
                "module_tasks": group.module_tasks,
                "seconds": round(group.seconds, 1),
                "module_start_ups": round(group.module_tasks * costs["module"], 1),
            }
            for name, group in sorted(groups.items(), key=lambda item: -item[1].seconds)
        },
        # Every task that ran, in order (the markdown shows the slowest).
        "tasks": [
            {"task": time.name, "action": time.action, "runs": time.runs, "seconds": round(time.seconds, 2)}
            for time in times
        ],
    }


def markdown(result: dict[str, Any]) -> str:
    no_op, costs = result["no_op"], result["calibration"]
    lines = [
        f"No-op `site.yml`, {result['clusters']} cluster(s), forks {result['forks']}: {no_op['wall_seconds']} s wall, "
        f"{no_op['changed']} changed, {no_op['tasks_run']} tasks run: {no_op['module_tasks']} module runs (a loop "
        f"runs its module once per item) and {no_op['controller_tasks']} controller-side tasks; calibration: a "
        f"controller-side task {costs['controller']} s, a module run (ping) {costs['module']} s.",
        "",
        "| role (phase) | tasks run | module runs | seconds | of which bare module start-ups |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, group in result["groups"].items():
        cells = (name, group["tasks"], group["module_tasks"], group["seconds"], group["module_start_ups"])
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    lines += ["", "| slowest tasks | action | runs | seconds |", "| --- | --- | --- | --- |"]
    slowest = sorted(result["tasks"], key=lambda row: -row["seconds"])[:SLOWEST_SHOWN]
    lines += [f"| {row['task']} | {row['action']} | {row['runs']} | {row['seconds']} |" for row in slowest]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=1)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.chdir(REPO)
    result = profile(args.clusters)
    text = markdown(result)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
