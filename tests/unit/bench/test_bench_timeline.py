"""The benchmark's attribution of emulator requests to playbook tasks by time (tests/bench/timeline.py).

Why test it: bench_metal's per-step request counts, set beside community.general's per-operation counts, are
only as good as this attribution; a request at a task boundary or between tasks must land where the rule says.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest
from bench.timeline import TaskWindow, attribute, counts_by_task, epoch, task_windows


class Req(NamedTuple):
    time: float
    path: str


# Three tasks: A [10, 20], B [20, 25] (touches A), a gap, C [30, 40]; the same name "A" once more at [50, 51].
WINDOWS = [
    TaskWindow("A", "p", 10.0, 20.0),
    TaskWindow("B", "p", 20.0, 25.0),
    TaskWindow("C", "p", 30.0, 40.0),
    TaskWindow("A", "p", 50.0, 51.0),
]

# (case, request time, index of the window that must take it, or None for outside every window)
CASES: list[tuple[str, float, int | None]] = [
    ("inside", 15.0, 0),
    ("at a start", 10.0, 0),
    ("at an end", 25.0, 1),
    ("at a shared boundary: the earlier task", 20.0, 0),
    ("just after the shared boundary", 20.000001, 1),
    ("in the gap between tasks", 27.5, None),
    ("before the first task", 9.999999, None),
    ("after the last task", 51.5, None),
    ("in a task whose name ran twice", 50.5, 3),
]


@pytest.mark.parametrize(("case", "at", "window"), CASES, ids=[c[0] for c in CASES])
def test_attribute_one_request(case: str, at: float, window: int | None) -> None:
    result = attribute([Req(at, case)], WINDOWS)
    taken = [index for index, requests in enumerate(result.by_window) if requests]
    assert taken == ([] if window is None else [window])
    assert result.outside == ([Req(at, case)] if window is None else [])


def test_attribute_keeps_every_request_and_counts_by_name() -> None:
    requests = [Req(t, str(t)) for t in (5.0, 12.0, 20.0, 21.0, 27.0, 35.0, 50.0, 51.0, 60.0)]
    result = attribute(requests, WINDOWS)
    assert sum(map(len, result.by_window)) + len(result.outside) == len(requests)
    assert [r.time for r in result.outside] == [5.0, 27.0, 60.0]
    # "A" ran twice: 12 and 20 in the first, 50 and 51 in the second; B has no boundary request of A's.
    assert counts_by_task(result) == {"A": 4, "B": 1, "C": 1}


def test_no_windows_leaves_everything_outside() -> None:
    result = attribute([Req(1.0, "x")], [])
    assert (result.by_window, len(result.outside)) == ([], 1)


# (case, callback stamp, epoch seconds)
STAMPS: list[tuple[str, str, float]] = [
    ("the callback's naive UTC with Z", "1970-01-01T00:00:10.500000Z", 10.5),
    ("no fraction", "1970-01-01T00:01:00Z", 60.0),
    ("an explicit offset", "1970-01-01T01:00:00+01:00", 0.0),
]


@pytest.mark.parametrize(("case", "stamp", "seconds"), STAMPS, ids=[c[0] for c in STAMPS])
def test_epoch(case: str, stamp: str, seconds: float) -> None:
    assert epoch(stamp) == pytest.approx(seconds)


def test_task_windows_skip_tasks_without_an_end() -> None:
    report = {
        "plays": [
            {
                "play": {"name": "metal"},
                "tasks": [
                    {
                        "task": {
                            "name": "ran",
                            "duration": {"start": "1970-01-01T00:00:01Z", "end": "1970-01-01T00:00:02Z"},
                        }
                    },
                    {"task": {"name": "no host matched", "duration": {"start": "1970-01-01T00:00:03Z"}}},
                ],
            }
        ]
    }
    assert task_windows(report) == [TaskWindow("ran", "metal", 1.0, 2.0)]
