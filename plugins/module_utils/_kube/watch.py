# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""List + watch several object sets under one deadline, and stop the moment a check passes.

Why: a sleep-poll either hammers the API or notices readiness late (kubernetes.core's
``k8s_info`` sleeps ``wait_sleep`` between checks). The informer pattern does neither: list once,
then watch from the list's ``resourceVersion`` and re-evaluate on every event, so readiness is
noticed within one event's latency and a 30 s wait costs one list and one watch per object set.

Each object set (``WatchSpec``) is followed by its own thread that keeps a consistent snapshot
flowing to the caller's thread: a dropped stream, a 410 Gone or any ending before the deadline
leads to a fresh list (which replaces that set's state, so deletions during an outage are not
missed); an API that is down is retried with ``Backoff`` until the one deadline shared by all
sets. The check runs in the caller's thread only, once every set has been listed at least once.
A final error (401, 403, a bad selector) ends the wait at once.

A set may carry an *optional* field selector (``spec.driver`` of ResourceSlices): ``KubeFeed``
sends it, and when the server rejects it with 400 (a CRD standing in for a built-in kind on a
server older than 1.30 has no ``selectableFields``) lists and watches without it and applies it
client-side, so the caller sees the same objects either way.

``Feed`` is the I/O seam: ``KubeFeed`` talks to the API server, tests pass a fake.
"""

from __future__ import annotations

import contextlib
import math
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError, MetalplaneError
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Clock, Deadline

from .client import KindNotServed, KubeClient, TransientApiError, watch_events

# Retry pacing while the API server is unreachable or answering 5xx: quick first retries (an
# apiserver restart takes about a second), capped so a long outage costs few requests.
OUTAGE_BACKOFF = Backoff(initial=0.2, cap=2.0, factor=2.0, jitter=0.2)
# Seconds the first look at each set may take when the timeout is shorter (timeout 0 = check once).
FIRST_LOOK_TIMEOUT = 10.0
# HTTP 410 Gone: the watch's resourceVersion is too old; only a fresh list recovers.
GONE = 410
# HTTP 400 Bad Request: how a server rejects a field selector it does not support.
BAD_REQUEST = 400

ObjectKey = tuple[str, str]  # (namespace or "", name)
State = dict[str, dict[ObjectKey, dict[str, Any]]]


@dataclass(frozen=True)
class WatchSpec:
    """One object set: a kind, optionally narrowed by namespace and selectors."""

    key: str
    api_version: str
    kind: str
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    # Sent with field_selector when the server supports it, else applied client-side (see KubeFeed).
    optional_field_selector: str | None = None

    def describe(self) -> str:
        text = f"{self.kind} ({self.api_version})"
        if self.namespace:
            text += f" in {self.namespace}"
        selectors = ",".join(s for s in (self.label_selector, self.field_selector, self.optional_field_selector) if s)
        return f"{text} [{selectors}]" if selectors else text


FieldRequirement = tuple[str, bool, str]  # (dotted path, equal?, value)
_FIELD_TERM = re.compile(r"([^=!\s]+)\s*(!=|==|=)\s*(.*)")


def parse_field_selector(text: str) -> list[FieldRequirement]:
    """``a.b=v,c!=w`` (also ``==``) as requirements; ValueError on anything else."""
    requirements: list[FieldRequirement] = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        match = _FIELD_TERM.fullmatch(term)
        if match is None:
            raise ValueError(f"not a field selector term: {term!r}")
        requirements.append((match[1], match[2] != "!=", match[3]))
    return requirements


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The value at a dotted path as the API server compares it ("" when absent)."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def matches_fields(obj: Mapping[str, Any], requirements: Iterable[FieldRequirement]) -> bool:
    return all((field_value(obj, path) == value) == equal for path, equal, value in requirements)


class Stream(Protocol):
    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...

    def interrupt(self) -> None:
        """Wake a reader blocked in this stream, from another thread (it then closes the stream)."""


class Feed(Protocol):
    def list(self, spec: WatchSpec, timeout: float) -> tuple[list[dict[str, Any]], str]: ...

    def watch(self, spec: WatchSpec, resource_version: str, timeout: float) -> Stream: ...


@dataclass
class Outcome:
    """What a wait ended with: the check's verdict and summary, and what the sets looked like."""

    ready: bool
    summary: Any
    state: State
    errors: dict[str, str] = field(default_factory=dict)
    elapsed: float = 0.0
    lists: int = 0
    watches: int = 0


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def apply_event(objects: dict[ObjectKey, dict[str, Any]], event_type: str, obj: dict[str, Any]) -> None:
    """Fold one watch event into a set's snapshot."""
    if event_type == "DELETED":
        objects.pop(object_key(obj), None)
    elif event_type in ("ADDED", "MODIFIED"):
        objects[object_key(obj)] = obj


class _Follower(threading.Thread):
    """Keeps one ``WatchSpec`` flowing into the shared queue until stopped or out of time."""

    def __init__(
        self,
        *,
        feed: Feed,
        spec: WatchSpec,
        deadline: Deadline,
        events: queue.Queue[tuple[Any, ...]],
        stop: threading.Event,
        backoff: Backoff,
    ) -> None:
        super().__init__(name=f"watch-{spec.key}", daemon=True)
        self.feed, self.spec, self.deadline = feed, spec, deadline
        self.events, self.stop, self.backoff = events, stop, backoff
        self.stream: Stream | None = None
        self.lists = 0
        self.watches = 0

    def run(self) -> None:
        delays = self.backoff.delays()
        first = True  # one look even when the deadline has passed (timeout 0 = check once)
        while not self.stop.is_set() and (first or not self.deadline.expired()):
            first = False
            try:
                self._list_and_watch()
                delays = self.backoff.delays()  # a healthy round resets the outage pacing
                continue
            except (TransientApiError, KindNotServed) as exc:
                self.events.put(("error", self.spec.key, exc.msg))
            except MetalplaneError as exc:
                self.events.put(("fatal", self.spec.key, exc))
                return
            except Exception as exc:
                self.events.put(("fatal", self.spec.key, MetalplaneError(f"Watching {self.spec.describe()}: {exc!r}")))
                return
            self.stop.wait(min(next(delays), self.deadline.remaining()))

    def _list_and_watch(self) -> None:
        items, resource_version = self.feed.list(self.spec, self.deadline.remaining())
        self.lists += 1
        self.events.put(("reset", self.spec.key, items))
        remaining = self.deadline.remaining()
        if self.stop.is_set() or remaining <= 0:
            return
        self.stream = self.feed.watch(self.spec, resource_version, math.ceil(remaining))
        self.watches += 1
        try:
            for event in self.stream:
                if self.stop.is_set():
                    return
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "BOOKMARK":
                    continue
                if kind == "ERROR":
                    code = obj.get("code")
                    if code == GONE:
                        return  # too old to resume: the caller's loop lists again
                    raise TransientApiError(
                        f"Watch of {self.spec.describe()} failed: {obj.get('message') or obj}", status=code
                    )
                self.events.put(("event", self.spec.key, kind, obj))
        finally:
            stream, self.stream = self.stream, None
            if stream is not None:
                stream.close()


def follow(
    feed: Feed,
    specs: Iterable[WatchSpec],
    check: Callable[[State], tuple[bool, Any]],
    *,
    timeout: float,
    backoff: Backoff = OUTAGE_BACKOFF,
    clock: Clock = time.monotonic,
) -> Outcome:
    """Follow every spec until ``check(state)`` says done or ``timeout`` passes (one deadline).

    ``check`` gets ``{spec.key: {(namespace, name): object}}`` and returns ``(done, summary)``.
    Returns the ``Outcome`` either way: the caller decides how a timeout fails. A ``MetalplaneError``
    that no retry can fix (401, 403, 422) is raised as soon as a follower meets it.
    """
    specs = list(specs)
    start = clock()
    deadline = Deadline(timeout, clock=clock)
    events: queue.Queue[tuple[Any, ...]] = queue.Queue()
    stop = threading.Event()
    state: State = {spec.key: {} for spec in specs}
    errors: dict[str, str] = {}
    followers = [
        _Follower(feed=feed, spec=spec, deadline=deadline, events=events, stop=stop, backoff=backoff) for spec in specs
    ]
    for follower in followers:
        follower.start()
    try:
        ready, summary = _consume(
            events=events, state=state, errors=errors, check=check, deadline=deadline, expected=len(specs)
        )
    finally:
        stop.set()
        for follower in followers:
            stream = follower.stream
            if stream is not None:
                with contextlib.suppress(Exception):  # best effort: the thread is a daemon
                    stream.interrupt()
    if not ready:
        ready, summary = check(state)
    return Outcome(
        ready=ready,
        summary=summary,
        state=state,
        errors=errors,
        elapsed=clock() - start,
        lists=sum(f.lists for f in followers),
        watches=sum(f.watches for f in followers),
    )


def _consume(
    *,
    events: queue.Queue[tuple[Any, ...]],
    state: State,
    errors: dict[str, str],
    check: Callable[[State], tuple[bool, Any]],
    deadline: Deadline,
    expected: int,
) -> tuple[bool, Any]:
    """Fold queued messages into ``state`` and run ``check`` until it passes or time is up."""
    synced: set[str] = set()
    looked: set[str] = set()  # sets whose first list answered, or failed
    ready, summary = False, None
    while True:
        if len(synced) == expected:
            ready, summary = check(state)
            if ready:
                return ready, summary
        remaining = deadline.remaining()
        if remaining <= 0:
            if len(looked) == expected:
                return ready, summary
            remaining = FIRST_LOOK_TIMEOUT  # a timeout shorter than one list still gets one look
        try:
            message = events.get(timeout=remaining)
        except queue.Empty:
            return ready, summary
        _apply(message, state, synced, errors, looked)
        while True:  # fold everything already queued before evaluating again
            try:
                _apply(events.get_nowait(), state, synced, errors, looked)
            except queue.Empty:
                break


def _apply(message: tuple[Any, ...], state: State, synced: set[str], errors: dict[str, str], looked: set[str]) -> None:
    action, key = message[0], message[1]
    looked.add(key)
    if action == "reset":
        state[key] = {object_key(obj): obj for obj in message[2]}
        synced.add(key)
        errors.pop(key, None)
    elif action == "event":
        apply_event(state[key], message[2], message[3])
    elif action == "error":
        errors[key] = message[2]
    elif action == "fatal":
        raise message[2]


def observe_once(feed: Feed, specs: Iterable[WatchSpec], timeout: float) -> State:
    """One list per spec, no waiting (check mode: report what is there now)."""
    return {spec.key: {object_key(obj): obj for obj in feed.list(spec, timeout)[0]} for spec in specs}


class _ResponseStream:
    def __init__(self, response: Any) -> None:
        self._response = response

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return watch_events(self._response)

    def interrupt(self) -> None:
        # Closing a urllib3 response blocks while another thread reads it (until the server ends
        # the stream); shutting the socket down wakes that reader at once. socket.socket's own
        # shutdown is used so an SSL socket's state is left to the reading thread. ``connection`` is
        # urllib3 2.x's public property (requirements.txt asks for urllib3 >= 2).
        connection = getattr(self._response, "connection", None)
        sock = getattr(connection, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def close(self) -> None:
        try:
            self._response.close()
            self._response.release_conn()
        except Exception:
            pass


class _FilteredStream:
    """A watch stream narrowed client-side: an object that does not match is reported DELETED
    (what the server does when an object leaves a field-selected watch)."""

    def __init__(self, stream: Stream, requirements: list[FieldRequirement]) -> None:
        self._stream, self._requirements = stream, requirements

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for event in self._stream:
            obj = event.get("object")
            left = isinstance(obj, Mapping) and not matches_fields(obj, self._requirements)
            if event.get("type") in ("ADDED", "MODIFIED") and left:
                yield {**event, "type": "DELETED"}
            else:
                yield event

    def interrupt(self) -> None:
        self._stream.interrupt()

    def close(self) -> None:
        self._stream.close()


class KubeFeed:
    """``Feed`` over a ``KubeClient``; discovery is serialised (its cache is not thread-safe).

    A spec's ``optional_field_selector`` is sent to the server until it answers 400 (field label
    not supported); from then on that spec is listed and watched without it and filtered here.
    """

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._resources: dict[tuple[str, str], Any] = {}
        self.client_side: set[WatchSpec] = set()  # specs whose optional selector the server rejected

    def _field_selector(self, spec: WatchSpec) -> str | None:
        parts = [spec.field_selector]
        if spec.optional_field_selector and spec not in self.client_side:
            parts.append(spec.optional_field_selector)
        return ",".join(p for p in parts if p) or None

    def _client_filter(self, spec: WatchSpec) -> list[FieldRequirement] | None:
        if spec.optional_field_selector and spec in self.client_side:
            return parse_field_selector(spec.optional_field_selector)
        return None

    def _resource(self, spec: WatchSpec) -> Any:
        with self._lock:
            found = self._resources.get((spec.api_version, spec.kind))
            if found is None:
                found = self.client.resource(spec.api_version, spec.kind)
                self._resources[(spec.api_version, spec.kind)] = found
            return found

    def list(self, spec: WatchSpec, timeout: float) -> tuple[list[dict[str, Any]], str]:
        resource = self._resource(spec)
        try:
            items, resource_version = self._list(spec, resource, timeout)
        except ApiError as exc:
            if exc.status != BAD_REQUEST or not spec.optional_field_selector or spec in self.client_side:
                raise
            with self._lock:
                self.client_side.add(spec)
            items, resource_version = self._list(spec, resource, timeout)
        requirements = self._client_filter(spec)
        if requirements is not None:
            items = [item for item in items if matches_fields(item, requirements)]
        return items, resource_version

    def _list(self, spec: WatchSpec, resource: Any, timeout: float) -> tuple[list[dict[str, Any]], str]:
        return self.client.list(
            resource,
            namespace=spec.namespace,
            label_selector=spec.label_selector,
            field_selector=self._field_selector(spec),
            request_timeout=max(FIRST_LOOK_TIMEOUT, timeout),
        )

    def watch(self, spec: WatchSpec, resource_version: str, timeout: float) -> Stream:
        response = self.client.open_watch(
            self._resource(spec),
            resource_version=resource_version,
            timeout_seconds=int(timeout),
            namespace=spec.namespace,
            label_selector=spec.label_selector,
            field_selector=self._field_selector(spec),
        )
        requirements = self._client_filter(spec)
        stream: Stream = _ResponseStream(response)
        return stream if requirements is None else _FilteredStream(stream, requirements)
