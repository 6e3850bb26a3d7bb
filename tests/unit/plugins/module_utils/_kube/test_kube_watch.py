"""The list+watch engine: one deadline, events instead of polls, re-list on drop/410, outage retries."""

from __future__ import annotations

from typing import Any

import pytest
from kube_fakes import FakeFeed, obj

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff
from ansible_collections.metalplane.inference.plugins.module_utils._kube import readiness
from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import TransientApiError
from ansible_collections.metalplane.inference.plugins.module_utils._kube.watch import (
    WatchSpec,
    apply_event,
    follow,
    object_key,
    observe_once,
)

SPEC = WatchSpec(key="objects", api_version="v1", kind="Thing", namespace="ns")
FAST = Backoff(initial=0.01, cap=0.02, factor=2.0, jitter=0.0)
COMPILED = readiness.compile_expression(None)


def check(state: dict[str, Any]) -> tuple[bool, Any]:
    return readiness.assess(COMPILED, state["objects"].values(), name=None)


def event(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": body}


def test_ready_at_once_costs_one_list_and_no_watch() -> None:
    feed = FakeFeed({"objects": [{"items": [obj("a", namespace="ns")]}]})
    outcome = follow(feed, [SPEC], check, timeout=5, backoff=FAST)
    assert outcome.ready is True
    assert feed.count("list") == 1
    # The watch may have been opened by the follower thread before the caller saw the list; at most one.
    assert feed.count("watch") <= 1


class FrozenClock:
    """A monotonic clock that never moves and counts its reads: a deadline read from it never passes."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return 1000.0


def test_ready_after_an_event_without_polling() -> None:
    events = [0.05, event("MODIFIED", obj("a", namespace="ns", ready="True"))]
    feed = FakeFeed({"objects": [{"items": [obj("a", namespace="ns", ready="False")], "events": events}]})
    clock = FrozenClock()
    outcome = follow(feed, [SPEC], check, timeout=5, backoff=FAST, clock=clock)
    # The clock never moves, so the deadline never passes: the only way this wait ends ready is the
    # watch event (a wait that ran out would have ended with the listed, not-ready state).
    assert outcome.ready is True
    assert outcome.elapsed == 0.0
    assert clock.reads > 0  # the deadline really was read from the injected clock
    assert feed.count("list") == 1
    assert feed.count("watch") == 1


def test_timeout_returns_last_state_and_watches_once() -> None:
    feed = FakeFeed({"objects": [{"items": [obj("a", namespace="ns", ready="False")]}]})
    outcome = follow(feed, [SPEC], check, timeout=0.3, backoff=FAST)
    assert outcome.ready is False
    assert [e["value"] for e in outcome.summary] == [False]
    assert feed.count("list") == 1
    assert feed.count("watch") == 1


def test_dropped_watch_is_followed_by_a_fresh_list() -> None:
    # Round 1: not ready, the stream ends early (dropped). Round 2: the re-list shows it ready.
    feed = FakeFeed(
        {
            "objects": [
                {"items": [obj("a", namespace="ns", ready="False")], "events": [], "hold": False},
                {"items": [obj("a", namespace="ns", ready="True")]},
            ]
        }
    )
    outcome = follow(feed, [SPEC], check, timeout=5, backoff=FAST)
    assert outcome.ready is True
    assert feed.count("list") == 2


def test_gone_410_relists_and_the_relist_replaces_state() -> None:
    gone = event("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version"})
    feed = FakeFeed(
        {
            "objects": [
                {"items": [obj("a", namespace="ns", ready="False"), obj("b", namespace="ns")], "events": [gone]},
                # b was deleted while the watch was gone, a is now ready: the re-list must forget b.
                {"items": [obj("a", namespace="ns", ready="True")]},
            ]
        }
    )
    outcome = follow(feed, [SPEC], check, timeout=5, backoff=FAST)
    assert outcome.ready is True
    assert [e["name"] for e in outcome.summary] == ["a"]


def test_api_down_is_retried_until_it_answers() -> None:
    down = TransientApiError("Listing Thing: connection refused")
    feed = FakeFeed({"objects": [down, down, {"items": [obj("a", namespace="ns")]}]})
    outcome = follow(feed, [SPEC], check, timeout=5, backoff=FAST)
    assert outcome.ready is True
    assert feed.count("list") == 3


def test_api_down_until_the_deadline_reports_the_last_error() -> None:
    feed = FakeFeed({"objects": [TransientApiError("Listing Thing: HTTP 503")]})
    outcome = follow(feed, [SPEC], check, timeout=0.3, backoff=FAST)
    assert outcome.ready is False
    assert outcome.errors == {"objects": "Listing Thing: HTTP 503"}
    assert feed.count("list") >= 2  # it kept trying, with backoff


def test_stream_breaking_mid_wait_relists() -> None:
    broken = TransientApiError("Watch stream broke: ProtocolError")
    feed = FakeFeed(
        {
            "objects": [
                {"items": [obj("a", namespace="ns", ready="False")], "events": [0.02, broken]},
                {"items": [obj("a", namespace="ns", ready="True")]},
            ]
        }
    )
    assert follow(feed, [SPEC], check, timeout=5, backoff=FAST).ready is True


def test_final_errors_end_the_wait_at_once() -> None:
    feed = FakeFeed({"objects": [ApiError("Listing Thing: HTTP 403: forbidden", status=403)]})
    with pytest.raises(ApiError) as err:
        follow(feed, [SPEC], check, timeout=30, backoff=FAST)
    assert err.value.status == 403


def test_bookmarks_are_ignored_and_deletes_applied() -> None:
    events = [
        event("BOOKMARK", {"metadata": {"resourceVersion": "120"}}),
        event("DELETED", obj("b", namespace="ns", ready="False")),
    ]
    feed = FakeFeed(
        {"objects": [{"items": [obj("a", namespace="ns"), obj("b", namespace="ns", ready="False")], "events": events}]}
    )
    outcome = follow(feed, [SPEC], check, timeout=5, backoff=FAST)
    assert outcome.ready is True
    assert [e["name"] for e in outcome.summary] == ["a"]


def test_one_deadline_for_several_sets_and_check_waits_for_all_lists() -> None:
    seen: list[set[str]] = []

    def both(state: dict[str, Any]) -> tuple[bool, Any]:
        seen.append({k for k, v in state.items() if v})
        return bool(state["x"]) and bool(state["y"]), None

    slow_y = [TransientApiError("HTTP 500"), {"items": [obj("y")]}]
    feed = FakeFeed({"x": [{"items": [obj("x")]}], "y": slow_y})
    specs = [WatchSpec("x", "v1", "X"), WatchSpec("y", "v1", "Y")]
    outcome = follow(feed, specs, both, timeout=5, backoff=FAST)
    assert outcome.ready is True
    assert seen[0] == {"x", "y"}  # never evaluated on a half-listed state


def test_apply_event_and_keys() -> None:
    objects: dict = {}
    apply_event(objects, "ADDED", obj("a", namespace="n"))
    apply_event(objects, "MODIFIED", obj("a", namespace="n", ready="False"))
    assert object_key(objects[("n", "a")]) == ("n", "a")
    apply_event(objects, "DELETED", obj("a", namespace="n"))
    assert objects == {}


def test_observe_once_lists_without_watching() -> None:
    feed = FakeFeed({"objects": [{"items": [obj("a", namespace="ns")]}]})
    state = observe_once(feed, [SPEC], 5)
    assert list(state["objects"]) == [("ns", "a")]
    assert feed.count("watch") == 0


def test_describe() -> None:
    spec = WatchSpec("k", "apps/v1", "DaemonSet", "gpu-operator", field_selector="metadata.name=v")
    assert spec.describe() == "DaemonSet (apps/v1) in gpu-operator [metadata.name=v]"


@pytest.mark.parametrize(("ready", "expected"), [("True", True), ("False", False)])
def test_timeout_zero_still_looks_once(ready: str, expected: bool) -> None:
    feed = FakeFeed({"objects": [{"items": [obj("a", namespace="ns", ready=ready)]}]})
    outcome = follow(feed, [SPEC], check, timeout=0, backoff=FAST)
    assert outcome.ready is expected
    assert [e["name"] for e in outcome.summary] == ["a"]
    assert feed.count("list") == 1
    assert feed.count("watch") == 0


def test_timeout_zero_with_the_api_down_reports_the_error() -> None:
    feed = FakeFeed({"objects": [TransientApiError("Listing Thing: connection refused")]})
    outcome = follow(feed, [SPEC], check, timeout=0, backoff=FAST)
    assert outcome.ready is False
    assert outcome.errors == {"objects": "Listing Thing: connection refused"}
    assert feed.count("list") == 1
