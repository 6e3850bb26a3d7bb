"""Object storage, resourceVersions, selectors and watch fan-out for the Kubernetes emulator.

Why: readiness modules are watch-based, and watches are where fake API servers usually lie: they
must resume from a resourceVersion, answer 410 Gone when that version was compacted away, filter by
selector (and synthesize ADDED/DELETED when an object enters or leaves the selector), and can be
dropped mid-stream. One global integer resourceVersion and a bounded event log give all of that.
"""

from __future__ import annotations

import copy
import queue
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
Key = tuple[str, str, str, str]  # (group, plural, namespace or "", name)

# How many events the watch log keeps; a watch from an older resourceVersion gets 410 Gone.
EVENT_LOG_SIZE = 5000


class SelectorError(ValueError):
    """An unparsable label or field selector (the server answers 400)."""


@dataclass
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    key: Key
    obj: Obj
    old: Obj | None = None


@dataclass
class Watcher:
    group: str
    plural: str
    namespace: str | None
    matches: Callable[[Obj], bool]
    events: queue.Queue[Event | None] = field(default_factory=queue.Queue)
    closed: bool = False


class Store:
    """Thread-safe object store; every write goes through ``put``/``remove`` under ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: dict[Key, Obj] = {}
        self.rv = 1
        self.log: deque[Event] = deque(maxlen=EVENT_LOG_SIZE)
        self.compacted_rv = 1  # watches from below this version get 410 Gone
        self.watchers: list[Watcher] = []

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def get(self, key: Key) -> Obj | None:
        return self.objects.get(key)

    def put(self, key: Key, obj: Obj, event_type: str, old: Obj | None) -> Obj:
        with self.lock:
            rv = self.next_rv()
            obj["metadata"]["resourceVersion"] = str(rv)
            self.objects[key] = obj
            self._publish(Event(rv, event_type, key, copy.deepcopy(obj), old))
            return obj

    def remove(self, key: Key) -> Obj | None:
        with self.lock:
            obj = self.objects.pop(key, None)
            if obj is None:
                return None
            rv = self.next_rv()
            obj["metadata"]["resourceVersion"] = str(rv)
            self._publish(Event(rv, "DELETED", key, copy.deepcopy(obj), None))
            return obj

    def _publish(self, event: Event) -> None:
        if len(self.log) == self.log.maxlen:
            self.compacted_rv = self.log[0].rv
        self.log.append(event)
        for watcher in self.watchers:
            if watcher.group == event.key[0] and watcher.plural == event.key[1]:
                watcher.events.put(event)

    def items(self, group: str, plural: str, namespace: str | None) -> list[tuple[Key, Obj]]:
        with self.lock:
            out = [
                (k, v)
                for k, v in self.objects.items()
                if k[0] == group and k[1] == plural and (namespace is None or k[2] == namespace)
            ]
        return sorted(out, key=lambda kv: (kv[0][2], kv[0][3]))

    def compact(self) -> None:
        """Forget the event log, as etcd compaction does: older watches get 410 Gone."""
        with self.lock:
            self.log.clear()
            self.compacted_rv = self.rv

    def subscribe(self, watcher: Watcher, since: int | None) -> list[Event] | None:
        """Register a watcher; return the logged events after ``since`` (None: too old, 410)."""
        with self.lock:
            backlog: list[Event] = []
            if since is not None:
                if since < self.compacted_rv:  # events in (since, compacted_rv] are gone
                    return None
                backlog = [
                    e for e in self.log if e.rv > since and e.key[0] == watcher.group and e.key[1] == watcher.plural
                ]
            self.watchers.append(watcher)
            return backlog

    def unsubscribe(self, watcher: Watcher) -> None:
        with self.lock:
            if watcher in self.watchers:
                self.watchers.remove(watcher)

    def drop_watches(self) -> int:
        with self.lock:
            dropped = list(self.watchers)
            for watcher in dropped:
                watcher.closed = True
                watcher.events.put(None)
            self.watchers.clear()
            return len(dropped)


# --- selectors ----------------------------------------------------------------------------------

_SET_RE = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(in|notin)\s*\(([^)]*)\)|(==|=|!=)\s*([A-Za-z0-9._-]*))?\s*$")


def _split_selector(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def label_matcher(selector: str | None) -> Callable[[dict[str, str]], bool]:
    """Parse a label selector (equality and set-based) into a predicate over a label map."""
    if not selector:
        return lambda _labels: True
    tests: list[Callable[[dict[str, str]], bool]] = []
    for part in _split_selector(selector):
        match = _SET_RE.match(part)
        if not match:
            raise SelectorError(f"unable to parse requirement: {part!r}")
        negate, key, set_op, values, eq_op, value = match.groups()
        if set_op:
            options = {v.strip() for v in values.split(",") if v.strip()}
            if set_op == "in":
                tests.append(lambda labels, k=key, o=options: labels.get(k) in o)
            else:
                tests.append(lambda labels, k=key, o=options: labels.get(k) not in o)
        elif eq_op:
            if eq_op == "!=":
                tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif negate:
            tests.append(lambda labels, k=key: k not in labels)
        else:
            tests.append(lambda labels, k=key: k in labels)
    return lambda labels: all(test(labels) for test in tests)


def field_value(obj: Obj, path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        current = current.get(part) if isinstance(current, dict) else None
    if isinstance(current, bool):
        return "true" if current else "false"
    return "" if current is None else str(current)


def field_matcher(selector: str | None, allowed: set[str], kind: str) -> Callable[[Obj], bool]:
    """Parse a field selector; unknown fields are a 400 like on a real server."""
    if not selector:
        return lambda _obj: True
    tests: list[Callable[[Obj], bool]] = []
    for part in selector.split(","):
        if not part.strip():
            continue
        match = re.match(r"^\s*([A-Za-z0-9._/-]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not match:
            raise SelectorError(f"invalid selector: {part!r}; can't understand {part!r}")
        path, op, value = match.groups()
        if path not in allowed:
            raise SelectorError(f'field label not supported: {path} for kind "{kind}"')
        if op == "!=":
            tests.append(lambda obj, p=path, v=value: field_value(obj, p) != v)
        else:
            tests.append(lambda obj, p=path, v=value: field_value(obj, p) == v)
    return lambda obj: all(test(obj) for test in tests)
