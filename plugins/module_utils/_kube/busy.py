# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a failed kubernetes.core task failed only because the API server said "busy, ask again".

Why: a busy or restarting kube-apiserver answers 429 (priority and fairness) or 5xx, and the kubernetes Python
library under kubernetes.core asks again only for reads; a create or patch fails its task. Those tasks are
declarative (read, compare, write), so running the whole task again is safe, and the roles do it with ``until``
on this decision. A refusal that running again cannot change (403, 404, 409, 422, a bad definition) is not busy:
it fails at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# The statuses that mean "not now": the same set the modules' own client treats as transient (client.py).
BUSY_STATUSES = frozenset({429, 500, 502, 503, 504})
# kubernetes.core's failed result carries the HTTP reason phrase of the answer (runner.py: ``e.__cause__.reason``).
BUSY_REASONS = frozenset(
    {"too many requests", "internal server error", "bad gateway", "service unavailable", "gateway timeout"}
)
# The Kubernetes Status in a failure message ("Failed to create object: {... "code": 429}").
_STATUS_CODE = re.compile(r'"code"\s*:\s*(\d{3})')
# What client-go prints for those answers (Helm's stderr): k8s.io/apimachinery's errors for 429 and 503.
BUSY_PHRASES = ("too many requests, please try again later", "the server is currently unable to handle the request")


def kube_busy(result: Any) -> bool:
    """True when ``result`` (a registered task result) failed and every sign of why says the API was busy (pure)."""
    if not isinstance(result, Mapping) or not result.get("failed"):
        return False
    reason = result.get("reason")
    if isinstance(reason, str) and reason.strip().lower() in BUSY_REASONS:
        return True
    text = " ".join(str(result.get(key) or "") for key in ("msg", "stderr"))
    codes = {int(code) for code in _STATUS_CODE.findall(text)}
    if codes:
        return codes <= BUSY_STATUSES
    lowered = text.lower()
    return any(phrase in lowered for phrase in BUSY_PHRASES)
