"""Start, stop and inspect the lab digital twin: every registered emulator on loopback.

    PYTHONPATH=tests python -m lab.labctl up [--delay-scale F]
            start what is not running (restart what runs with another delay scale), write endpoints.yml
    PYTHONPATH=tests python -m lab.labctl status
            what runs, where, whether it answers, and the contract checks of those that check one
    PYTHONPATH=tests python -m lab.labctl down
            stop only what labctl started, clean state; exits 1 if an emulator recorded a contract violation

(from the repository root; ``make lab-up``, ``lab-status`` and ``lab-down`` run exactly these). The
lab is the package ``lab`` in ``tests/``: see ``lab.common.emulator`` and docs/lab/index.md.

Why a supervisor of its own: the playbooks, molecule and ``make demo`` need the emulators as real
processes on real ports, and a developer's machine must never be left with stray servers. Every
process is recorded (PID plus its kernel start time) the moment it is spawned, so ``down`` after a
crash of labctl or of an emulator still finds and stops exactly what labctl started, and never a
process that merely reused a PID.

Emulators that check their platform's API contract (the Vultr one, with the overlay spec: see
``lab.common.registry``) keep a report in the state directory; ``down`` prints it and fails on a violation,
so ``make demo`` and molecule's destroy cannot pass over an emulator that served what the real API
would not.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

try:
    from lab.common.emulator import LOOPBACK, free_port, lab_command, lab_environment
    from lab.common.registry import CONTRACT_PATH, EMULATORS, Emulator
except ModuleNotFoundError as exc:  # run as a file without tests/ on the path: say how to run it
    if exc.name != "lab":
        raise
    sys.exit("labctl: run it from the repository root as `PYTHONPATH=tests python -m lab.labctl up|status|down`")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STATE_DIR = REPO_ROOT / "inventories" / "lab" / ".state"
LONGHORN_STANDIN_CHART = REPO_ROOT / "tests" / "lab" / "charts" / "longhorn-standin"
CILIUM_STANDIN_CHART = REPO_ROOT / "tests" / "lab" / "charts" / "cilium-standin"
LAB_HELM = REPO_ROOT / ".build" / "bin" / "helm"
PROCESSES_FILE = "processes.json"
ENDPOINTS_FILE = "endpoints.yml"
READY_TIMEOUT = 30.0  # seconds an emulator gets to accept connections and write its files
STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL
PRIVATE_MODE = 0o600  # endpoints.yml carries (lab) credentials
CONTROL_TIMEOUT = 5.0  # seconds for a running emulator to answer GET /lab/contract
SHOWN_VIOLATIONS = 20  # violations printed by down per emulator (the report file has them all)


@dataclass
class Running:
    """One emulator process labctl started."""

    name: str
    pid: int
    port: int
    start_ticks: int | None  # /proc/<pid>/stat field 22: tells a live PID from a reused one
    script: str
    # The --delay-scale the process was started with: endpoints.yml publishes the lab's scale, so
    # an `up` with another scale restarts the process. None: recorded by a labctl that did not keep it.
    delay_scale: float | None = None

    @property
    def alive(self) -> bool:
        return _start_ticks(self.pid) is not None and (
            self.start_ticks is None or _start_ticks(self.pid) == self.start_ticks
        )


def _start_ticks(pid: int) -> int | None:
    """Kernel start time of ``pid`` in clock ticks, or None if no such (live) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:  # not Linux: fall back to "a process with this PID exists"
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return 0
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie has exited; it only waits for its parent
        return None
    return int(fields[19])


class Lab:
    """The lab's state directory and the processes recorded in it."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.log_dir = state_dir / "logs"
        self.processes_file = state_dir / PROCESSES_FILE
        self.endpoints_file = state_dir / ENDPOINTS_FILE
        self.restart_contracts: dict[str, dict[str, Any]] = {}  # set by up()

    # -- records -------------------------------------------------------------------------------
    def recorded(self) -> dict[str, Running]:
        if not self.processes_file.exists():
            return {}
        raw = json.loads(self.processes_file.read_text())
        return {item["name"]: Running(**item) for item in raw}

    def _record(self, running: dict[str, Running]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.processes_file.with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(r) for r in running.values()], indent=2))
        tmp.replace(self.processes_file)

    # -- up ------------------------------------------------------------------------------------
    def up(self, delay_scale: float) -> tuple[dict[str, Running], list[str]]:
        """Start what is not running; return what runs and the names restarted for a new delay scale.

        A process started with another delay scale is stopped and started again (with a fresh
        state: the emulators keep theirs in memory), so endpoints.yml never publishes a scale that a
        running emulator does not use.
        """
        self.log_dir.mkdir(parents=True, exist_ok=True)
        running = {name: r for name, r in self.recorded().items() if r.alive}
        restarted = [name for name, r in running.items() if r.delay_scale != delay_scale]
        for name in restarted:
            _terminate(running.pop(name))
        # What a restarted emulator checked is reported before its next start replaces the report.
        self.restart_contracts = self.contract_reports(restarted)
        if restarted:
            self._record(running)
        for emulator in EMULATORS:
            if emulator.name in running:
                continue
            started = self._spawn(emulator, delay_scale)
            running[emulator.name] = started
            self._record(running)  # before waiting: a crash from here on is still cleaned by down
            try:
                self._wait_ready(emulator, started)
            except RuntimeError:
                self.down()
                raise
        self._record(running)
        self._write_endpoints(running, delay_scale)
        return running, restarted

    def _spawn(self, emulator: Emulator, delay_scale: float) -> Running:
        # A previous process's ready files (e.g. a kubeconfig naming its port) must not make the new
        # one look ready before it has written its own.
        for path in emulator.ready_files(self.state_dir):
            path.unlink(missing_ok=True)
        # Nor a previous contract report speak for it (it writes its own before it listens).
        if emulator.contract_report is not None:
            emulator.contract_report(self.state_dir).unlink(missing_ok=True)
        port = free_port()
        cmd = lab_command(
            emulator.module,
            "--host",
            LOOPBACK,
            "--port",
            str(port),
            "--delay-scale",
            str(delay_scale),
            "--state-dir",
            str(self.state_dir),
            *emulator.extra_args(self.state_dir),
        )
        log = (self.log_dir / f"{emulator.name}.log").open("ab")
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=lab_environment(),
        )
        log.close()
        return Running(emulator.name, proc.pid, port, _start_ticks(proc.pid), str(emulator.script), delay_scale)

    def _wait_ready(self, emulator: Emulator, running: Running) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        files = emulator.ready_files(self.state_dir)
        while time.monotonic() < deadline:
            if not running.alive:
                raise RuntimeError(f"{emulator.name} exited during start-up; see {self._log(emulator.name)}")
            if _accepts(running.port) and all(path.exists() for path in files):
                return
            time.sleep(0.1)
        raise RuntimeError(f"{emulator.name} not ready after {READY_TIMEOUT:g}s; see {self._log(emulator.name)}")

    def _log(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def _write_endpoints(self, running: dict[str, Running], delay_scale: float) -> None:
        emulators = {e.name: e for e in EMULATORS}
        document: dict[str, Any] = {
            "lab": {
                "state_dir": str(self.state_dir),
                "delay_scale": delay_scale,
                # What the lab inventory needs from this checkout: the Longhorn and Cilium stand-in charts
                # (the real charts cannot be downloaded here) and helm from `make venv` if it is there.
                "longhorn_chart_path": str(LONGHORN_STANDIN_CHART),
                "cilium_chart_path": str(CILIUM_STANDIN_CHART),
                "helm": str(LAB_HELM) if LAB_HELM.is_file() else "",
            },
            "emulators": {
                name: emulators[name].endpoint(LOOPBACK, r.port, self.state_dir)
                for name, r in running.items()
                if name in emulators
            },
        }
        header = "# Written by tests/lab/labctl.py; read by inventories/lab. Lab-only credentials.\n"
        fd = os.open(self.endpoints_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_MODE)
        with os.fdopen(fd, "w") as handle:
            handle.write(header + yaml.safe_dump(document, sort_keys=False))
        os.chmod(self.endpoints_file, PRIVATE_MODE)

    # -- down ----------------------------------------------------------------------------------
    def down(self) -> tuple[list[str], dict[str, dict[str, Any]]]:
        """Stop every recorded process that is still ours.

        Return the names that were stopped and the final contract report of each recorded emulator
        that checked one (read after it stopped, so its last exchanges are counted).
        """
        stopped = []
        recorded = self.recorded()
        for running in recorded.values():
            if running.alive:
                _terminate(running)
                stopped.append(running.name)
        contracts = self.contract_reports(list(recorded))
        self.processes_file.unlink(missing_ok=True)
        self.endpoints_file.unlink(missing_ok=True)
        return stopped, contracts

    # -- contract reports ----------------------------------------------------------------------
    def contract_reports(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """The contract report file of each named emulator that wrote one (it checks a contract)."""
        reports = {}
        for emulator in EMULATORS:
            if emulator.name not in names or emulator.contract_report is None:
                continue
            report = _read_report(emulator.contract_report(self.state_dir))
            if report is not None:
                reports[emulator.name] = report
        return reports

    def live_contract(self, emulator: Emulator, running: Running | None) -> dict[str, Any] | None:
        """A running emulator's contract report: asked over ``/lab/contract``, else read from its file."""
        if emulator.contract_report is None:
            return None
        if running is not None and running.alive:
            url = f"http://{LOOPBACK}:{running.port}{CONTRACT_PATH}"
            try:
                with urllib.request.urlopen(url, timeout=CONTROL_TIMEOUT) as answer:
                    report = json.loads(answer.read())
                return report if report.get("enabled") else None
            except (OSError, ValueError):  # not answering (yet): the file is the next best thing
                pass
        return _read_report(emulator.contract_report(self.state_dir))

    # -- status --------------------------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        recorded = self.recorded()
        rows = []
        for emulator in EMULATORS:
            running = recorded.get(emulator.name)
            rows.append(
                {
                    "name": emulator.name,
                    "pid": running.pid if running else None,
                    "port": running.port if running else None,
                    "state": _state(running),
                    "contract": self.live_contract(emulator, running) if running else None,
                    "lines": (
                        emulator.status_lines(self.state_dir, running.port)
                        if running and running.alive and emulator.status_lines is not None
                        else []
                    ),
                }
            )
        return rows


def _read_report(path: Path) -> dict[str, Any] | None:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def contract_line(name: str, report: dict[str, Any]) -> str:
    """``vultr: contract: 42 exchanges checked, 0 violations``."""
    count = len(report.get("violations") or [])
    return (
        f"{name}: contract: {report.get('checked', 0)} exchanges checked, {count} violation{'' if count == 1 else 's'}"
    )


def report_contracts(reports: dict[str, dict[str, Any]], state_dir: Path, when: str) -> int:
    """Print each report (violations on stderr); return the number of violations."""
    total = 0
    for name, report in reports.items():
        violations = report.get("violations") or []
        total += len(violations)
        print(contract_line(name, report))
        for finding in violations[:SHOWN_VIOLATIONS]:
            reason = " ".join(str(finding.get("reason")).split())
            print(f"  CONTRACT VIOLATION: {finding.get('method')} {finding.get('path')}: {reason}", file=sys.stderr)
        if len(violations) > SHOWN_VIOLATIONS:
            print(f"  ... and {len(violations) - SHOWN_VIOLATIONS} more", file=sys.stderr)
    if total:
        print(
            f"labctl: {total} contract violation(s) recorded {when}: an emulator answered what the real API would "
            f"not, or was sent what it would refuse (reports under {state_dir}, logs under {state_dir / 'logs'})",
            file=sys.stderr,
        )
    return total


def _state(running: Running | None) -> str:
    if running is None:
        return "stopped"
    if not running.alive:
        return "dead (run down, then up)"
    return "up" if _accepts(running.port) else "not answering"


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((LOOPBACK, port)) == 0


def _terminate(running: Running) -> None:
    """SIGTERM the emulator's process group, then SIGKILL it if it outlives the grace period."""
    try:
        os.killpg(running.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_GRACE
    while time.monotonic() < deadline:
        if not running.alive:
            return
        time.sleep(0.05)
    try:
        os.killpg(running.pid, signal.SIGKILL)
    except ProcessLookupError:
        return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help="default: %(default)s")
    parser.add_argument(
        "--delay-scale",
        type=float,
        default=float(os.environ.get("LAB_DELAY_SCALE", "1.0")),
        help="multiplies every simulated delay; 0 = instant (env LAB_DELAY_SCALE)",
    )
    args = parser.parse_args(argv)
    lab = Lab(args.state_dir.resolve())
    if args.command == "up":
        try:
            running, restarted = lab.up(args.delay_scale)
        except RuntimeError as exc:
            print(f"labctl: {exc}", file=sys.stderr)
            return 1
        if restarted:
            print(f"restarted with delay scale {args.delay_scale:g} (their state is reset): {', '.join(restarted)}")
            report_contracts(lab.restart_contracts, lab.state_dir, "before the restart")
        for r in running.values():
            print(f"{r.name:<10} up    pid {r.pid:<8} 127.0.0.1:{r.port}")
        print(f"endpoints: {lab.endpoints_file}")
        return 0
    if args.command == "down":
        stopped, contracts = lab.down()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return 1 if report_contracts(contracts, lab.state_dir, "while the lab ran") else 0
    for row in lab.status():
        where = f"127.0.0.1:{row['port']}" if row["port"] else "-"
        line = f"{row['name']:<10} {row['state']:<26} pid {row['pid'] or '-':<8} {where}"
        if row["contract"] is not None:
            count = len(row["contract"].get("violations") or [])
            line += (
                f"  contract: {row['contract'].get('checked', 0)} checked, {count} violation{'' if count == 1 else 's'}"
            )
        print(line)
        for extra in row["lines"]:
            print(extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
