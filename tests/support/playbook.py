"""Run a real ``ansible-playbook`` from a test and read every task result back as JSON.

Why: integration tests must exercise modules the way users run them (argument validation,
no_log, check/diff mode, the action groups), not by calling Python functions. The JSON callback
from ansible.posix gives each task's result per host.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


@contextmanager
def _prepared(
    tasks_or_plays: list[dict[str, Any]] | str | Path,
    *,
    inventory: str | Path | None,
    extra_vars: dict[str, Any] | None,
    check: bool,
    diff: bool,
    verbosity: int,
    env: dict[str, str] | None,
    tags: str | None,
    limit: str | None,
) -> Iterator[tuple[list[str], dict[str, str]]]:
    """The ansible-playbook command line and environment, with the playbook and extra vars files it names."""
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
        yield cmd, run_env


def _parsed(rc: int, stdout: str, stderr: str) -> PlaybookRun:
    report: dict[str, Any] = {}
    start = stdout.find("{")
    if start >= 0:
        try:
            report = json.loads(stdout[start:])
        except json.JSONDecodeError:
            report = {}
    return PlaybookRun(rc=rc, stdout=stdout, stderr=stderr, report=report)


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
    options = {"check": check, "diff": diff, "verbosity": verbosity, "tags": tags, "limit": limit}
    with _prepared(tasks_or_plays, inventory=inventory, extra_vars=extra_vars, env=env, **options) as (cmd, run_env):
        proc = subprocess.run(
            cmd, cwd=REPO_ROOT, env=run_env, capture_output=True, text=True, timeout=timeout, check=False
        )
    return _parsed(proc.returncode, proc.stdout, proc.stderr)


def run_playbook_killed_when(
    tasks_or_plays: list[dict[str, Any]] | str | Path,
    kill_when: Callable[[], bool],
    *,
    inventory: str | Path | None = None,
    extra_vars: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    poll: float = 0.2,
    limit: str | None = None,
) -> PlaybookRun:
    """Run a playbook and SIGKILL it, workers and module processes included, as soon as ``kill_when()`` holds.

    Why the whole process group: a controller that dies (power cut, OOM, a cancelled AWX job's pod) takes the
    module it was running with it; killing only ansible-playbook would leave its forked worker finishing the
    module's wait, and the "killed" run would quietly complete. ``rc`` is -9 when the kill happened, or the
    playbook's own exit status when it ended before ``kill_when`` held (the caller asserts which it expects).
    """
    options = {"check": False, "diff": False, "verbosity": 0, "tags": None, "limit": limit}
    with (
        _prepared(tasks_or_plays, inventory=inventory, extra_vars=extra_vars, env=env, **options) as (cmd, run_env),
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
    ):
        proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, env=run_env, stdout=out, stderr=err, text=True, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None:
                if kill_when():
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(cmd, timeout)
                time.sleep(poll)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out.seek(0)
        err.seek(0)
        return _parsed(proc.returncode, out.read(), err.read())
