"""Slices of an emulated BMC's request log (``BmcState.requests``), shared by the Redfish tests.

Why: these tests prove what a module sent (and what it did not send) from the BMC's own log,
not from the module's word. One filter keeps the matching rules (method, path, status, time
window) the same in every test that reads the log.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from lab.redfish.bmc import RequestRecord

# Methods that change something on a BMC.
WRITES = frozenset({"POST", "PATCH", "PUT", "DELETE"})


def select(
    records: Iterable[RequestRecord],
    *,
    method: str | Collection[str] | None = None,
    path_contains: str | None = None,
    path_endswith: str | None = None,
    status: int | None = None,
    start: float | None = None,
    end: float | None = None,
) -> list[RequestRecord]:
    """The records that match every given criterion, in log order.

    ``method`` is one method or a set of them (e.g. ``WRITES``); ``start``/``end`` bound the
    emulator's timestamp of each request (inclusive), e.g. one task's window in a play.
    """
    methods = {method} if isinstance(method, str) else method
    return [
        r
        for r in records
        if (methods is None or r.method in methods)
        and (path_contains is None or path_contains in r.path)
        and (path_endswith is None or r.path.endswith(path_endswith))
        and (status is None or r.status == status)
        and (start is None or r.time >= start)
        and (end is None or r.time <= end)
    ]
