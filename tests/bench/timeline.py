"""Attribute an emulator's request log to the playbook tasks that made it, by time.

Why by time: the BMC emulator logs every exchange with its wall-clock time, and ansible's JSON callback
(``ansible.posix.json``) stamps every task with its start and end; with one host and the linear strategy the
tasks of a run do not overlap, so the task whose window holds a request's time is the task that sent it. That
tells where a whole ``site.yml`` run spends its Redfish requests without instrumenting the modules.

Pure functions (no lab, no ansible), unit-tested in ``tests/unit/bench/test_bench_timeline.py``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

# The JSON callback writes ``datetime.utcnow().isoformat() + "Z"`` (naive UTC with a literal Z); the emulator
# stamps requests with ``time.time()`` (seconds since the epoch). Both are turned into epoch seconds here.
UTC_SUFFIX = "Z"


class Timed(Protocol):
    """Anything with an epoch ``time`` (the emulator's ``RequestRecord`` is one)."""

    @property
    def time(self) -> float: ...


R = TypeVar("R", bound=Timed)


@dataclass(frozen=True)
class TaskWindow:
    """One task of a run: its name, the play it ran in, and its [start, end] in epoch seconds."""

    name: str
    play: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class Attribution(Generic[R]):
    """Requests per task window (same order as the windows) and those that fell in no window."""

    windows: list[TaskWindow]
    by_window: list[list[R]]
    outside: list[R] = field(default_factory=list)


def epoch(stamp: str) -> float:
    """``2026-12-03T10:00:00.123456Z`` (the JSON callback's form) -> epoch seconds."""
    moment = datetime.datetime.fromisoformat(stamp.removesuffix(UTC_SUFFIX))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def task_windows(report: dict[str, Any]) -> list[TaskWindow]:
    """Every task of a JSON-callback report that has both ends, in run order.

    A task that never produced a host result (no host matched) has no ``end`` and cannot hold a request:
    it is left out rather than given an open window.
    """
    windows: list[TaskWindow] = []
    for play in report.get("plays", []):
        play_name = play.get("play", {}).get("name", "")
        for task in play.get("tasks", []):
            duration = task.get("task", {}).get("duration", {})
            if "start" in duration and "end" in duration:
                windows.append(
                    TaskWindow(task["task"]["name"], play_name, epoch(duration["start"]), epoch(duration["end"]))
                )
    return windows


def attribute(requests: Iterable[R], windows: Sequence[TaskWindow]) -> Attribution[R]:
    """Give each request to the first window (in run order) with ``start <= time <= end``.

    Both ends are inclusive: a request logged at the very instant a task ended was sent by that task (the
    emulator logs after it answers, the callback stamps the end after the module returned). When two windows
    touch (one task's end equals the next one's start), the earlier task takes the request. A request in no
    window (between tasks, before the first, after the last) is kept in ``outside``, so that a total never
    silently loses one.
    """
    result: Attribution[R] = Attribution(list(windows), [[] for _window in windows])
    for request in requests:
        for index, window in enumerate(windows):
            if window.start <= request.time <= window.end:
                result.by_window[index].append(request)
                break
        else:
            result.outside.append(request)
    return result


def counts_by_task(attribution: Attribution[Any]) -> dict[str, int]:
    """Requests per task name (a name that ran more than once is summed), tasks with no request left out."""
    counts: dict[str, int] = {}
    for window, requests in zip(attribution.windows, attribution.by_window, strict=True):
        if requests:
            counts[window.name] = counts.get(window.name, 0) + len(requests)
    return counts
