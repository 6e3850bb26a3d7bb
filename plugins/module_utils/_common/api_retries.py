# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How many requests a platform's API asked this module run to repeat, for its result and the run's timeline.

Why a process-wide count: the retries happen deep in an HTTP library's retry policy (``_kube/client.py``), far from
the module's result; one module run is one process, so a counter here reaches ``MetalplaneModule.run``, which reports
it as ``api_requests.retries`` (the timeline callback shows a task with retries as a recovery, kind ``api_retry``).
"""

from __future__ import annotations

_TAKEN = {"retries": 0}


def record_retry() -> None:
    """One request was answered "ask again later" and is asked again."""
    _TAKEN["retries"] += 1


def taken() -> int:
    """Requests asked again since this process started."""
    return _TAKEN["retries"]


def with_retries(result: dict[str, object]) -> dict[str, object]:
    """``result`` with the retries added to its ``api_requests.retries`` (unchanged when there were none)."""
    count = taken()
    if not count:
        return result
    requests = result.get("api_requests")
    merged = dict(requests) if isinstance(requests, dict) else {}
    previous = merged.get("retries")
    merged["retries"] = (previous if isinstance(previous, int) else 0) + count
    return {**result, "api_requests": merged}
