"""Helpers shared by the kube integration tests: act when the module is watching, count requests.

The request record is the emulator's request log, or on the real lane the apiserver's audit log
(the tests' user, list and watch only), both read through ``kube.requests()`` as records with a
``verb`` (``list``, ``watch``, ...), a ``path`` (no query) and a ``query``.

One difference shapes ``when_watching``: the emulator logs a watch when it arrives, but
kube-apiserver 1.20 writes a watch's audit events (ResponseStarted included) only when the watch
ends. On the real lane the module's *list* is the signal instead: its follower opens the watch
right after the list answers, from the list's resourceVersion, so a change made after the list is
delivered through that watch whether or not it was open yet. Faults that need the watch open
(``drop_until_relisted``) check that they took effect.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The real lane's record comes over HTTP from lane-control: poll it less often than the in-process log.
POLL = {"emulator": 0.02, "real": 0.1}
# How long ``when_watching`` waits for the module's watch before acting anyway (then the test
# fails on its own assertions, naming what was not seen).
WATCH_WAIT = 120.0
# Real lane: seconds from the module's list to acting, so its watch (sent right after) is open.
REAL_WATCH_MARGIN = 1.0
# Real lane: how long a drop may take to show as a new list before ``drop_until_relisted`` cuts again.
RELIST_WAIT = 8.0


@dataclass(frozen=True)
class Seen:
    """One request as the tests count it."""

    verb: str
    path: str
    query: str
    status: int | None = None

    @classmethod
    def from_emulator(cls, record: Any) -> Seen:
        watch = "watch=true" in record.query.lower() or "watch=1" in record.query
        verb = "watch" if watch else {"GET": "list", "POST": "create", "PUT": "update"}.get(record.method, "other")
        return cls(verb, record.path, record.query, record.status)


def watch_requests(kube: Any, path_part: str, *, settle: bool = True) -> list[Any]:
    return [r for r in kube.requests(settle=settle) if r.verb == "watch" and path_part in r.path]


def list_requests(kube: Any, path_part: str, *, settle: bool = True) -> list[Any]:
    """Answered lists of a collection (a GET of one object does not end with the collection's path;
    a list refused with 4xx/5xx, e.g. a field selector a 1.20 server does not support, is not one)."""
    return [
        r
        for r in kube.requests(settle=settle)
        if r.verb == "list" and r.path.endswith(path_part) and (r.status is None or r.status < 400)
    ]


def when_watching(kube: Any, path_part: str, action: Callable[[], None], *, nth: int = 1,
                  after: float = 0.3) -> threading.Thread:  # fmt: skip
    """Run ``action`` ``after`` seconds once the module has opened its ``nth`` watch on ``path_part``.

    Seen in the request record (the emulator logs the watch itself; on the real lane, the ``nth``
    list plus ``REAL_WATCH_MARGIN``: see the module docstring), so "ready after a delay" and the
    faults really happen while the module waits, whatever ansible-playbook's start-up time.
    """
    poll = POLL["real" if kube.real else "emulator"]

    def seen() -> int:
        if kube.real:
            return len(list_requests(kube, path_part, settle=False))
        return len(watch_requests(kube, path_part, settle=False))

    def run() -> None:
        deadline = time.monotonic() + WATCH_WAIT
        while seen() < nth and time.monotonic() < deadline:
            time.sleep(poll)
        time.sleep(after + (REAL_WATCH_MARGIN if kube.real else 0.0))
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def drop_until_relisted(kube: Any, path_part: str, attempts: int = 5) -> int:
    """Drop every watch; on the real lane repeat until the module lists ``path_part`` again.

    A drop that comes before the module's watch is open cuts nothing the module notices; the
    module's answer to a real cut is a new list, so that is what is waited for. Returns how many
    drops it took (a module that never re-lists makes the caller's own assertions fail).
    """
    before = len(list_requests(kube, path_part, settle=False))
    for attempt in range(1, attempts + 1):
        kube.drop_watches()
        if not kube.real:
            return attempt
        deadline = time.monotonic() + RELIST_WAIT
        while time.monotonic() < deadline:
            if len(list_requests(kube, path_part, settle=False)) > before:
                return attempt
            time.sleep(POLL["real"])
    return attempts
