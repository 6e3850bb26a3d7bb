"""CPU seconds and peak memory of process trees, read from /proc (Linux), for the site benchmark.

Why: on the lab at delay 0 the platforms' waits are zero, so a run's time is CPU, and two parties share the
machine's cores: the controller (``ansible-playbook``, its forks and the modules they start) and the lab's
emulators answering them. Only the first is the collection's cost on a real fleet, so the benchmark reports
them apart. The controller's peak memory (``ansible-playbook`` and every process under it at one moment) is what
an AWX/AAP container or a CI runner must hold.
"""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
# Seconds between two samples of the controller's memory: short enough to catch the forks of a task.
SAMPLE_SECONDS = 0.5


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; everything after its closing parenthesis is space-separated.
    return text[text.rindex(")") + 2 :].split()


def parents() -> dict[int, int]:
    """pid -> ppid of every live process."""
    found = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                found[int(entry.name)] = int(fields[1])
    return found


def tree(roots: Iterable[int]) -> set[int]:
    """The roots and every live descendant."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents().items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = list(roots)
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(children.get(pid, []))
    return found


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU of the live processes ``pids`` (their own, and of their children they waited for)."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            # Fields 14-17 of /proc/<pid>/stat (utime, stime, cutime, cstime), 0-based 11-14 after the name.
            total += sum(int(value) for value in fields[11:15])
    return total / TICKS


def pss_bytes(pids: Iterable[int]) -> int:
    """Proportional set size: a page shared by n processes counts 1/n to each (forks share most of their memory
    with ansible-playbook, which a sum of RSS would count once per fork)."""
    total = 0
    for pid in pids:
        try:
            for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except (OSError, IndexError, ValueError):
            continue
    return total


def rss_bytes(pids: Iterable[int]) -> int:
    total = 0
    for pid in pids:
        try:
            resident = int((PROC / str(pid) / "statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        total += resident * PAGE
    return total


def children_cpu_seconds() -> float:
    """CPU of every child this process has waited for (and of theirs): a subprocess.run's whole tree."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu_seconds(pid: int) -> float | None:
    """User + system CPU of ``pid`` itself (not its children), or None when it is gone."""
    fields = _stat_fields(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / TICKS


class PeakRss:
    """Samples the summed RSS of a process and its descendants until stopped; ``peak`` is the largest sum seen.

    Also keeps the process's own CPU seconds at its last sample (``own_cpu``): for ``ansible-playbook``, the
    strategy, templating and result handling in its main process, apart from the forks and modules."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self.peak_pss = 0
        self.processes = 0
        self.own_cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            own = own_cpu_seconds(self.pid)
            if own is not None:
                self.own_cpu = own
            pids = tree([self.pid])
            total = rss_bytes(pids)
            if total > self.peak:
                self.peak, self.processes = total, len(pids)
            self.peak_pss = max(self.peak_pss, pss_bytes(pids))
            self._stop.wait(SAMPLE_SECONDS)
