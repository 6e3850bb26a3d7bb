"""The vultr-python internals ``vultr_adapter`` relies on, checked against the installed vultr-python.

Why: ``Vultr._req`` and ``Vultr._session`` are private and may move in any release. These tests drive
the real ``vultr.Vultr`` (no network: its session's ``request`` is replaced) and fail naming the member
and the vultr-python version (``support.library_pins.moved``).
"""

from __future__ import annotations

import importlib
import inspect
import re
from importlib.metadata import version
from typing import Any

import pytest
import requests
import vultr

from ansible_collections.metalplane.inference.plugins.module_utils._vultr.vultr_adapter import (
    VULTR_PRIVATE_MEMBERS,
    VultrBase,
)
from support.library_pins import moved, pinned

ADAPTER = "plugins/module_utils/_vultr/vultr_adapter.py"
URL = vultr.Vultr.url  # vultr-python's default base URL


def _resolve(dotted: str) -> type:
    module, _unused, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(
    ("owner", "name"), [(owner, name) for owner, names in VULTR_PRIVATE_MEMBERS.items() for name in names]
)
def test_the_private_members_still_exist(owner: str, name: str) -> None:
    klass = _resolve(owner)
    found = name in vars(klass) or re.search(rf"self\.{name}\s*=", inspect.getsource(klass)) is not None
    assert found, moved("vultr-python", ADAPTER, f"{owner}.{name} (gone)")


def test_the_installed_vultr_python_is_the_range_the_adapter_was_checked_against() -> None:
    outside = moved("vultr-python", ADAPTER, "version (outside the pin)")
    assert version("vultr-python") in pinned("vultr-python"), outside


def test_http_session_is_the_bearer_session() -> None:
    session = VultrBase(api_key="secret-key").http_session
    assert isinstance(session, requests.Session), moved("vultr-python", ADAPTER, "Vultr._session (not a Session)")
    assert session.headers.get("Authorization") == "Bearer secret-key", moved(
        "vultr-python", ADAPTER, "Vultr._session (no Bearer header)"
    )


class _Recording(VultrBase):
    def __init__(self) -> None:
        super().__init__(api_key="k")
        self.calls: list[tuple[str, str, Any, Any]] = []

    def request(self, method: str, url: str, data: Any = None, params: dict[str, Any] | None = None) -> Any:
        self.calls.append((method.upper(), url, data, params))
        return {"plans": ["vcg"]}


CLUSTERS = "/kubernetes/clusters"


@pytest.mark.parametrize(
    ("verb", "args", "kwargs", "expected"),
    [
        ("get", (CLUSTERS,), {"params": {"per_page": 1}}, ("GET", CLUSTERS, None, {"per_page": 1})),
        ("post", (CLUSTERS,), {"label": "x"}, ("POST", CLUSTERS, {"label": "x"}, None)),
        ("patch", (CLUSTERS + "/1",), {"label": "y"}, ("PATCH", CLUSTERS + "/1", {"label": "y"}, None)),
        ("put", (CLUSTERS + "/1",), {"label": "z"}, ("PUT", CLUSTERS + "/1", {"label": "z"}, None)),
        ("delete", (CLUSTERS + "/1",), {}, ("DELETE", CLUSTERS + "/1", None, None)),
        ("list_plans", ({"type": "vcg"},), {}, ("GET", "/plans", None, {"type": "vcg"})),
    ],
)
def test_every_vultr_python_verb_goes_through_request(
    verb: str, args: tuple[Any, ...], kwargs: dict[str, Any], expected: tuple[str, str, Any, Any]
) -> None:
    client = _Recording()
    getattr(client, verb)(*args, **kwargs)
    method, path, data, params = expected
    assert client.calls == [(method, URL + path, data, params)], moved(
        "vultr-python", ADAPTER, f"Vultr._req (Vultr.{verb} no longer sends through it)"
    )


def test_request_defaults_to_vultr_pythons_own_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[str, str, dict[str, Any]]] = []

    def fake_request(method: str, url: str, **kwargs: Any) -> requests.Response:
        sent.append((method, url, kwargs))
        response = requests.Response()
        response.status_code = 200
        response.headers["content-type"] = "application/json"
        response._content = b'{"plans": []}'  # building a requests.Response by hand
        return response

    client = VultrBase(api_key="k")
    monkeypatch.setattr(client.http_session, "request", fake_request)
    assert client.get("/plans", params={"type": "vcg"}) == {"plans": []}
    assert [(m, u, kw.get("params")) for m, u, kw in sent] == [("get", URL + "/plans", {"type": "vcg"})], moved(
        "vultr-python", ADAPTER, "Vultr._req (its own transport)"
    )
