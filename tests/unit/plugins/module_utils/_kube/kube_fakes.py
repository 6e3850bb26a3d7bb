"""A scripted ``Feed`` for the watch engine and the module runners (no network, no sleeps)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any


def obj(name: str, *, namespace: str | None = None, ready: str | None = "True", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    body: dict[str, Any] = {"metadata": meta, **extra}
    if ready is not None:
        body.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": ready, "reason": "R" + ready}]
    return body


class FakeStream:
    def __init__(self, events: list[Any], hold: bool, closed: threading.Event) -> None:
        self.events, self.hold, self.closed = events, hold, closed

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for event in self.events:
            if isinstance(event, BaseException):
                raise event
            if isinstance(event, float):  # a pause between events, ended early by close()
                if self.closed.wait(event):
                    return
                continue
            yield event
        if self.hold:  # an open watch with nothing to say, until the deadline closes it
            self.closed.wait(30)

    def close(self) -> None:
        self.closed.set()

    def interrupt(self) -> None:
        self.closed.set()


class FakeFeed:
    """Per spec key, a list of rounds; each round is one list (+ one watch). The last round repeats.

    A round is an exception (raised by ``list``) or a dict: ``items`` (listed), ``events`` (streamed:
    event dicts, floats = pauses, exceptions = stream failures), ``hold`` (keep the stream open after
    the events, default True), ``watch_error`` (raised when opening the watch).
    """

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.calls: list[tuple[str, str, Any]] = []
        self._round: dict[str, int] = {}
        self._lock = threading.Lock()

    def _current(self, key: str) -> Any:
        rounds = self.script[key]
        return rounds[min(self._round.get(key, 0), len(rounds) - 1)]

    def list(self, spec: Any, timeout: float) -> tuple[list[dict[str, Any]], str]:
        with self._lock:
            self.calls.append(("list", spec.key, spec))
            current = self._current(spec.key)
            if isinstance(current, BaseException):
                self._round[spec.key] = self._round.get(spec.key, 0) + 1
                raise current
            return list(current.get("items", [])), "100"

    def watch(self, spec: Any, resource_version: str, timeout: float) -> FakeStream:
        with self._lock:
            self.calls.append(("watch", spec.key, resource_version))
            current = self._current(spec.key)
            self._round[spec.key] = self._round.get(spec.key, 0) + 1
        if current.get("watch_error"):
            raise current["watch_error"]
        return FakeStream(list(current.get("events", [])), current.get("hold", True), threading.Event())

    def count(self, verb: str, key: str | None = None) -> int:
        return sum(1 for c in self.calls if c[0] == verb and (key is None or c[1] == key))
