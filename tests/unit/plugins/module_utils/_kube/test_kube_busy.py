"""kube_busy: which failed kubernetes.core results are worth running again (table of real result shapes)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._kube.busy import kube_busy


def status(code: int, reason: str) -> str:
    return (
        'Failed to create object: {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", '
        f'"message": "m", "reason": "{reason}", "code": {code}}}'
    )


# (case, registered result, busy). The shapes are kubernetes.core 6.x's runner.py (reason + msg) and helm's stderr.
CASES: list[tuple[str, Any, bool]] = [
    ("did not fail", {"changed": True}, False),
    ("not a result", "failed", False),
    ("429 by reason", {"failed": True, "reason": "Too Many Requests", "msg": status(429, "TooManyRequests")}, True),
    ("503 by reason", {"failed": True, "reason": "Service Unavailable", "msg": "x"}, True),
    ("504 by status only", {"failed": True, "msg": status(504, "Timeout")}, True),
    ("422 invalid", {"failed": True, "reason": "Unprocessable Entity", "msg": status(422, "Invalid")}, False),
    ("409 conflict", {"failed": True, "reason": "Conflict", "msg": status(409, "AlreadyExists")}, False),
    ("403 forbidden", {"failed": True, "reason": "Forbidden", "msg": status(403, "Forbidden")}, False),
    (
        "helm, apiserver busy",
        {
            "failed": True,
            "msg": "Failure when executing Helm command.",
            "stderr": "Error: the server is currently unable to handle the request (post secrets)",
        },
        True,
    ),
    (
        "helm, chart error",
        {"failed": True, "msg": "Failure when executing Helm command.", "stderr": "Error: no chart"},
        False,
    ),
    ("a module's own failure", {"failed": True, "msg": "Failed to find exact match for v1.Nope"}, False),
    ("no message at all", {"failed": True}, False),
]


@pytest.mark.parametrize(("result", "busy"), [pytest.param(r, b, id=c) for c, r, b in CASES])
def test_only_busy_answers_are_worth_asking_again(result: Any, busy: bool) -> None:
    assert kube_busy(result) is busy
