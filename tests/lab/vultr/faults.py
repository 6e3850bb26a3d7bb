"""Fault injection and the request log of the Vultr emulator.

Why: the client must honour ``Retry-After`` on 429/503, retry other 5xx only for idempotent methods,
and never replay a POST whose response was lost (issue 3). Those paths only run when the API
misbehaves, so the emulator misbehaves on demand, per endpoint, deterministically (a count) or
statistically (a probability drawn from a seeded RNG, so a failing run can be replayed).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

# Fault kinds. ``429``/``500``/``503``: answered instead of handling the request (nothing happens).
# ``lost_response``: the request takes effect, then the connection is closed without an answer (what a
# client sees when a proxy or the network drops the response). ``500_applied``: the request takes
# effect, then a 500 is answered (a server that failed after acting: a create that "failed" but exists).
# ``undocumented_field``: the real answer plus a field the spec does not document (a 204 gets a body):
# a deliberate contract violation, to prove that the contract check (``--contract``) is on and reported.
FAULT_KINDS = ("429", "500", "503", "latency", "lost_response", "500_applied", "undocumented_field")
# The field ``undocumented_field`` adds to a JSON object answer.
UNDOCUMENTED_FIELD = "lab_undocumented_field"


@dataclass
class Fault:
    fault: str
    method: str | None = None  # None or "*" matches every method
    path: str = ".*"  # regex, searched in the path below /v2 (e.g. r"/kubernetes/clusters$")
    count: int | None = None  # next N matching requests; None: 1, or unlimited with a probability
    probability: float | None = None
    retry_after: int | None = 1  # seconds; None sends no Retry-After header
    latency: float = 0.5  # seconds, for "latency"
    fired: int = 0
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.fault = str(self.fault)
        if self.fault not in FAULT_KINDS:
            raise ValueError(f"unknown fault {self.fault!r}; expected one of {', '.join(FAULT_KINDS)}")
        if self.probability is not None and not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be between 0 and 1")
        if self.count is None and self.probability is None:
            self.count = 1
        if self.count is not None and self.count < 0:
            raise ValueError("count must not be negative")
        if self.method in ("", "*"):
            self.method = None
        self._regex = re.compile(self.path)

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.fired >= self.count

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method.upper() == method) and self._regex.search(path) is not None

    def describe(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("_regex", None)
        return out


class FaultInjector:
    """Faults are tried in the order they were added; the first one that fires wins."""

    def __init__(self, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._rng = random.Random(seed)

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def active(self) -> list[Fault]:
        with self._lock:
            return [f for f in self._faults if not f.exhausted]

    def pick(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.exhausted or not fault.matches(method, path):
                    continue
                if fault.probability is not None and self._rng.random() >= fault.probability:
                    continue
                fault.fired += 1
                return fault
        return None


@dataclass
class RequestLog:
    """Every /v2 request: method, path (with /v2), query, status (None: response lost), timestamp."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    counters: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, method: str, path: str, query: dict[str, str], status: int | None, fault: str | None) -> None:
        entry = {
            "method": method,
            "path": path,
            "query": query,
            "status": status,
            "fault": fault,
            "timestamp": time.time(),
        }
        with self._lock:
            self.entries.append(entry)
            self.counters[f"{method} {path}"] += 1
            self.counters[f"status {status}"] += 1
            self.counters["total"] += 1

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(e) for e in self.entries]

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()
            self.counters.clear()
