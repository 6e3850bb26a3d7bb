"""Run a real ``ansible-playbook`` from a test and read every task result back as JSON.

Why: integration tests must exercise modules the way users run them (argument validation,
no_log, check/diff mode, the action groups), not by calling Python functions. The JSON callback
from ansible.posix gives each task's result per host.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .collection import REPO_ROOT, ansible_env

# ansible-core >= 2.20 starts a multiprocessing RPC server whose Unix socket lives at
# ``$TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX`` (32 more characters); a socket path is limited to
# 108 bytes, and when it does not fit every run dies with "Local RPC server did not start".
MAX_TMPDIR_CHARS = 64
SHORT_TMP_ROOT = "/tmp" if Path("/tmp").is_dir() else tempfile.gettempdir()


def check_tmpdir(env: dict[str, str]) -> None:
    """Refuse a TMPDIR too long for ansible-core's RPC socket, naming the fix (the ``ansible_tmp`` fixture)."""
    tmpdir = env.get("TMPDIR", "")
    if len(tmpdir) > MAX_TMPDIR_CHARS:
        raise ValueError(
            f"TMPDIR {tmpdir!r} is {len(tmpdir)} characters; ansible-core's RPC socket under it would exceed "
            f"the 108-byte Unix socket limit. Use the ansible_tmp fixture (at most {MAX_TMPDIR_CHARS} characters)."
        )


@dataclass
class PlaybookRun:
    rc: int
    stdout: str
    stderr: str
    report: dict[str, Any] = field(default_factory=dict)

    def task(self, name: str, host: str = "localhost") -> dict[str, Any]:
        """Result of the last task called ``name`` on ``host``; KeyError if it never ran."""
        found: dict[str, Any] | None = None
        for play in self.report.get("plays", []):
            for task in play.get("tasks", []):
                if task["task"]["name"] == name and host in task.get("hosts", {}):
                    found = task["hosts"][host]
        if found is None:
            raise KeyError(f"task {name!r} did not run on {host!r}")
        return found

    @property
    def stats(self) -> dict[str, Any]:
        return self.report.get("stats", {})

    def changed(self, host: str = "localhost") -> int:
        return int(self.stats.get(host, {}).get("changed", 0))


def run_playbook(
    tasks_or_plays: list[dict[str, Any]] | str | Path,
    *,
    inventory: str | Path | None = None,
    extra_vars: dict[str, Any] | None = None,
    check: bool = False,
    diff: bool = False,
    verbosity: int = 0,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    tags: str | None = None,
    limit: str | None = None,
) -> PlaybookRun:
    """Run a playbook file, or a list of tasks wrapped in one local play, and parse the JSON report.

    A list of dicts is treated as *tasks* when none of them has ``hosts``; otherwise as plays.
    """
    with tempfile.TemporaryDirectory(prefix="mp-play-") as tmp:
        tmpdir = Path(tmp)
        if isinstance(tasks_or_plays, list):
            plays = tasks_or_plays
            if not any("hosts" in item for item in plays):
                plays = [{"name": "test", "hosts": "localhost", "gather_facts": False, "tasks": plays}]
            playbook = tmpdir / "play.yml"
            playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
        else:
            playbook = Path(tasks_or_plays)
        cmd = [str(Path(sys.executable).with_name("ansible-playbook")), str(playbook)]
        cmd += ["-i", str(inventory) if inventory else "localhost,", "-c", "local"]
        if extra_vars:
            vars_file = tmpdir / "extra_vars.json"
            vars_file.write_text(json.dumps(extra_vars))
            cmd += ["-e", f"@{vars_file}"]
        if check:
            cmd.append("--check")
        if diff:
            cmd.append("--diff")
        if tags:
            cmd += ["--tags", tags]
        if limit:
            cmd += ["--limit", limit]
        if verbosity:
            cmd.append("-" + "v" * verbosity)
        run_env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", **(env or {}))
        check_tmpdir(run_env)
        run_env.setdefault("METALPLANE_TEST_PYTHON", sys.executable)
        run_env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
        proc = subprocess.run(
            cmd, cwd=REPO_ROOT, env=run_env, capture_output=True, text=True, timeout=timeout, check=False
        )
    report: dict[str, Any] = {}
    start = proc.stdout.find("{")
    if start >= 0:
        try:
            report = json.loads(proc.stdout[start:])
        except json.JSONDecodeError:
            report = {}
    return PlaybookRun(rc=proc.returncode, stdout=proc.stdout, stderr=proc.stderr, report=report)
