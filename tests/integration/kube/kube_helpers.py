"""Helpers shared by the kube integration tests: act when the module is watching, count requests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def watch_requests(kube: Any, path_part: str) -> list[Any]:
    return [r for r in kube.emulator.requests if path_part in r.path and "watch=true" in r.query]


def list_requests(kube: Any, path_part: str) -> list[Any]:
    return [r for r in kube.emulator.requests if r.path.endswith(path_part) and "watch=true" not in r.query]


def when_watching(kube: Any, path_part: str, action: Callable[[], None], *, nth: int = 1,
                  fallback: float = 4.0, after: float = 0.3) -> threading.Thread:  # fmt: skip
    """Run ``action`` ``after`` seconds once the module has opened its ``nth`` watch on ``path_part``.

    On the emulator this waits for the watch request itself, so "ready after a delay" really
    happens while the module waits (ansible-playbook start-up time varies). On a real server
    there is no request log: ``fallback`` seconds after the call.
    """

    def run() -> None:
        if kube.emulator is None:
            time.sleep(fallback)
        else:
            deadline = time.monotonic() + 60
            while len(watch_requests(kube, path_part)) < nth and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(after)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
