"""labctl starts every registered emulator, is harmless twice, and leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from lab.common.emulator import lab_command, lab_environment
from lab.common.registry import EMULATORS


def labctl(state_dir: Path, *args: str, delay_scale: str = "0") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        lab_command("lab.labctl", *args, "--state-dir", str(state_dir), "--delay-scale", delay_scale),
        env=lab_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def our_processes(state_dir: Path) -> list[int]:
    """PIDs of live processes whose command line names this state directory."""
    return sorted(our_command_lines(state_dir))


def our_command_lines(state_dir: Path) -> dict[int, list[str]]:
    """Command line (argv) of each live process whose command line names this state directory."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(state_dir) in " ".join(argv) and state != "Z":
            found[int(entry.name)] = argv
    return found


@pytest.fixture
def state_dir(tmp_path: Path):
    path = tmp_path / "state"
    yield path
    labctl(path, "down")  # whatever a failing test left running


def test_up_twice_then_down_leaves_no_process(state_dir: Path) -> None:
    assert EMULATORS, "no emulator is registered in tests/lab/common/registry.py"

    first = labctl(state_dir, "up")
    assert first.returncode == 0, first.stderr
    endpoints = yaml.safe_load((state_dir / "endpoints.yml").read_text())
    assert set(endpoints["emulators"]) == {e.name for e in EMULATORS}
    assert (state_dir / "endpoints.yml").stat().st_mode & 0o777 == 0o600
    pids = sorted(our_processes(state_dir))
    assert len(pids) >= len(EMULATORS)

    second = labctl(state_dir, "up")
    assert second.returncode == 0, second.stderr
    assert sorted(our_processes(state_dir)) == pids, "a second up must not start anything new"

    status = labctl(state_dir, "status")
    assert status.stdout.count(" up ") == len(EMULATORS), status.stdout

    down = labctl(state_dir, "down")
    assert down.returncode == 0, down.stderr
    assert our_processes(state_dir) == []
    assert not (state_dir / "endpoints.yml").exists()
    assert (state_dir / "logs").is_dir(), "logs are kept for post-mortems"


def test_down_after_an_emulator_crashed(state_dir: Path) -> None:
    assert labctl(state_dir, "up").returncode == 0
    victim = our_processes(state_dir)[0]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while victim in our_processes(state_dir) and time.monotonic() < deadline:
        time.sleep(0.05)

    assert "dead" in labctl(state_dir, "status").stdout
    assert labctl(state_dir, "down").returncode == 0
    assert our_processes(state_dir) == []


def test_down_never_touches_a_process_it_did_not_start(state_dir: Path) -> None:
    """A recorded PID that now belongs to another process (PID reuse) is left alone."""
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state_dir.mkdir(parents=True)
        record = f'[{{"name": "vultr", "pid": {stranger.pid}, "port": 1, "start_ticks": 1, "script": "x"}}]'
        (state_dir / "processes.json").write_text(record)
        assert labctl(state_dir, "down").returncode == 0
        assert stranger.poll() is None, "labctl killed a process it did not start"
    finally:
        stranger.kill()
        stranger.wait()


def test_up_with_another_delay_scale_restarts_the_emulators(state_dir: Path) -> None:
    """endpoints.yml never publishes a delay scale that a running emulator does not use."""
    assert labctl(state_dir, "up").returncode == 0
    before = our_processes(state_dir)

    again = labctl(state_dir, "up", delay_scale="0.5")
    assert again.returncode == 0, again.stderr
    assert "restarted with delay scale 0.5" in again.stdout
    after = our_command_lines(state_dir)
    assert set(after).isdisjoint(before), "every emulator started with scale 0 must have been stopped"
    scales = {argv[argv.index("--delay-scale") + 1] for argv in after.values() if "--delay-scale" in argv}
    assert scales == {"0.5"}
    assert yaml.safe_load((state_dir / "endpoints.yml").read_text())["lab"]["delay_scale"] == 0.5
    assert set(yaml.safe_load((state_dir / "endpoints.yml").read_text())["emulators"]) == {e.name for e in EMULATORS}
    status = labctl(state_dir, "status")
    assert status.stdout.count(" up ") == len(EMULATORS), status.stdout

    same = labctl(state_dir, "up", delay_scale="0.5")
    assert same.returncode == 0, same.stderr
    assert "restarted" not in same.stdout
    assert sorted(our_command_lines(state_dir)) == sorted(after), "the same scale must not restart anything"
