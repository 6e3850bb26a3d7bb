"""The timeline callback in a real ansible-playbook run: two clusters, phases from tags, reports, summary."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.collection import ansible_env
from support.playbook import PlaybookRun

CALLBACK = "metalplane.inference.timeline"
HOSTS = ("vke-ewr-1", "vke-ewr-2")
ROLE_TASKS = [{"name": "adopt", "ansible.builtin.command": "true", "changed_when": False}]
PLAYS: list[dict[str, Any]] = [
    {
        "name": "up",
        "hosts": "all",
        "gather_facts": False,
        "tags": ["phase:provision"],
        "tasks": [
            {"name": "create cluster", "ansible.builtin.command": "true", "changed_when": False},
            {"name": "create pools", "ansible.builtin.command": "true", "changed_when": False},
            {
                "name": "wait for GPUs",
                "tags": ["phase:gpu_ready"],
                "ansible.builtin.command": "true",
                "changed_when": False,
            },
            {
                "name": "storage",
                "tags": ["phase:storage"],
                "block": [
                    {"name": "install longhorn", "ansible.builtin.command": "true", "changed_when": False},
                    {
                        "name": "storage class (second cluster only)",
                        "ansible.builtin.command": "true",
                        "changed_when": False,
                        "when": "inventory_hostname == 'vke-ewr-2'",
                    },
                ],
            },
            {"name": "adoption role", "ansible.builtin.import_role": {"name": "adopt"}, "tags": ["phase:adoption"]},
        ],
    },
    {
        "name": "report",
        "hosts": "all",
        "gather_facts": False,
        "tasks": [{"name": "untagged", "ansible.builtin.debug": {"msg": "done"}}],
    },
]


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """An inventory of two local 'clusters' and a role, under tmp_path."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(
        yaml.safe_dump({"all": {"hosts": {h: {"ansible_connection": "local"} for h in HOSTS}}}, sort_keys=False)
    )
    role = tmp_path / "roles" / "adopt" / "tasks"
    role.mkdir(parents=True)
    (role / "main.yml").write_text(yaml.safe_dump(ROLE_TASKS))
    return tmp_path


def test_json_report_with_json_stdout(playbook: Callable[..., PlaybookRun], lab: Path) -> None:
    out = lab / "timeline"
    run = playbook(
        PLAYS,
        inventory=lab / "inventory.yml",
        env={
            "ANSIBLE_CALLBACKS_ENABLED": CALLBACK,
            "METALPLANE_TIMELINE_DIR": str(out),
            "ANSIBLE_ROLES_PATH": str(lab / "roles"),
        },
    )
    assert run.rc == 0, run.stderr
    # The table went to stderr: the json stdout callback's document is still parseable.
    assert run.report, run.stdout[-2000:]
    assert run.task("untagged", host="vke-ewr-1")["msg"] == "done"
    assert "TIMELINE (seconds per cluster and phase" in run.stderr

    report = json.loads((out / "timeline.json").read_text())
    assert report["phases"] == ["provision", "gpu_ready", "storage", "adoption", "other"]
    assert sorted(report["clusters"]) == list(HOSTS)
    tasks = {host: {p: r["tasks"] for p, r in c["phases"].items()} for host, c in report["clusters"].items()}
    # The when-false task still ran on vke-ewr-1 (as a skip) and counts there too.
    assert tasks == {host: {"provision": 2, "gpu_ready": 1, "storage": 2, "adoption": 1, "other": 1} for host in HOSTS}
    for cluster in report["clusters"].values():
        assert cluster["failed"] == 0
        total = sum(r["seconds"] for r in cluster["phases"].values())
        assert cluster["seconds"] == pytest.approx(total, abs=0.01)
        for record in cluster["phases"].values():
            assert record["seconds"] >= 0
            assert 0 <= record["start"] <= record["end"] <= report["duration"] + 0.01
        # phases follow one another in the play's order
        starts = [cluster["phases"][p]["start"] for p in report["phases"]]
        assert starts == sorted(starts)
    page = (out / "timeline.html").read_text()
    assert page.count("<svg ") == 2
    assert all(f"<h2>{host}</h2>" in page for host in HOSTS)
    assert "<script" not in page


def test_summary_on_default_stdout_and_failures(lab: Path) -> None:
    """Default stdout callback: the table is on stdout; a failing cluster is marked; no files without output_dir."""
    plays = [
        {
            "name": "teardown",
            "hosts": "all",
            "gather_facts": False,
            "tags": ["phase:teardown"],
            "tasks": [
                {"name": "delete", "ansible.builtin.command": "true", "changed_when": False},
                {
                    "name": "fails on one cluster",
                    "ansible.builtin.fail": {"msg": "boom"},
                    "when": "inventory_hostname == 'vke-ewr-2'",
                },
            ],
        }
    ]
    (lab / "down.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    env = ansible_env(ANSIBLE_CALLBACKS_ENABLED=CALLBACK, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    env.pop("METALPLANE_TIMELINE_DIR", None)
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("ansible-playbook")),
            "-i",
            str(lab / "inventory.yml"),
            str(lab / "down.yml"),
        ],
        cwd=lab,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("TIMELINE (seconds per cluster and phase"))
    assert start > next(i for i, line in enumerate(lines) if line.startswith("PLAY RECAP"))
    assert lines[start + 1].split() == ["cluster", "teardown", "total"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[start + 3 : start + 5]}
    assert set(rows) == set(HOSTS)
    assert not rows["vke-ewr-1"][0].endswith("!")
    assert rows["vke-ewr-2"][0].endswith("!")
    assert "! a task of this phase failed" in proc.stdout
    assert "TIMELINE reports" not in proc.stdout + proc.stderr
    assert not (lab / "timeline").exists()
