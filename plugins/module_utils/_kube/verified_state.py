# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A record of the last verified state of a phase, so that a reconcile that changes nothing can skip the phase.

Why: on a scheduled reconcile that changes nothing, a phase such as the storage role still ran a dozen module
start-ups (Helm, every readiness wait, every read) to find that nothing had changed (issue 19's profile,
docs/benchmarks/site.md). Skipping the waits whenever the writes report no change is not safe: a run killed after
the Helm release was installed and before its waits passed would make every later run skip them for good. So the
skip rests on a record that the phase writes only at its very end, once every wait has passed:

- ``digest``: a hash of the phase's inputs as this run wants them (values, chart, templates...), computed by the
  caller. A change of any input changes the digest, and the phase runs in full.
- ``objects``: one line per watched object, its identity (``uid``) and, where asked, its ``generation`` or
  ``resourceVersion`` at that moment. An object deleted and recreated, a new Helm revision (a new release Secret),
  an edited spec, a node added or removed: the line differs, and the phase runs in full.
- every watched object must still exist and satisfy its readiness expression now; otherwise the phase runs.

The record is one key per phase in a ConfigMap in the namespace the phase owns, so removing the phase (its
namespace) removes its record. It is written only by a run that verified everything; a run killed before that point
leaves the previous record, whose digest or object lines no longer match what the killed run changed.
"""

from __future__ import annotations

import getpass
import json
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError, NotFoundError

from . import readiness, selector
from .object_store import Conflict

RECORD_API = ("v1", "ConfigMap")
DEFAULT_RECORD_NAME = "metalplane-verified"
RECORD_LABELS = {
    "app.kubernetes.io/managed-by": "metalplane.inference",
    "metalplane.inference/record": "verified-state",
}
# What changes an object's line: its uid only (recreated), plus metadata.generation (its spec edited; status
# updates do not count), or plus metadata.resourceVersion (any write, for kinds without a generation).
IDENTITIES = ("uid", "generation", "version")
# A ConfigMap data key: the phase name.
_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
# A record update that meets a concurrent one reads again and retries this many times.
CONFLICT_RETRIES = 3
# Changed lines named in a reason, at most.
REASON_LIMIT = 5


@dataclass(frozen=True)
class Watched:
    """One watched object (``name``) or object set (a list, optionally by label)."""

    api_version: str
    kind: str
    namespace: str
    name: str | None
    label_selector: str | None
    expression: Any  # compiled JMESPath, or None
    identity: str

    def describe(self) -> str:
        if self.name:
            return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"
        text = f"{self.kind} ({self.api_version})"
        if self.namespace:
            text += f" in {self.namespace}"
        if self.label_selector:
            text += f" [{self.label_selector}]"
        return text


@dataclass
class Observation:
    lines: list[str]
    problems: list[str]


def check_phase(value: Any) -> str:
    text = str(value or "")
    if not _KEY.match(text):
        raise InputError("phase", f"must be letters, digits, '-', '_' or '.' (a ConfigMap key), got {value!r}")
    return text


def parse_watch(entries: Sequence[Mapping[str, Any]]) -> list[Watched]:
    """The ``watch`` option as ``Watched`` entries; every bad field named before any request."""
    if not entries:
        raise InputError("watch", "name at least one object: a record that watches nothing would verify anything")
    watched = []
    for index, entry in enumerate(entries):
        field = f"watch[{index}]"
        kind = str(entry.get("kind") or "")
        if not kind:
            raise InputError(f"{field}.kind", "is required")
        identity = str(entry.get("identity") or "uid")
        if identity not in IDENTITIES:
            raise InputError(f"{field}.identity", f"must be one of {', '.join(IDENTITIES)}, got {identity!r}")
        name = entry.get("name") or None
        labels = entry.get("label_selectors") or []
        if name and labels:
            raise InputError(f"{field}.label_selectors", "cannot be combined with name")
        label_selector = selector.check(",".join(labels), f"{field}.label_selectors") if labels else None
        expression = entry.get("expression")
        watched.append(
            Watched(
                api_version=str(entry.get("api_version") or "v1"),
                kind=kind,
                namespace=str(entry.get("namespace") or ""),
                name=str(name) if name else None,
                label_selector=label_selector,
                expression=readiness.compile_expression(expression, f"{field}.expression") if expression else None,
                identity=identity,
            )
        )
    return watched


def object_line(watched: Watched, obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    line = f"{watched.api_version} {watched.kind} {where}{meta.get('name')} uid={meta.get('uid')}"
    if watched.identity == "generation":
        line += f" generation={meta.get('generation')}"
    elif watched.identity == "version":
        line += f" resourceVersion={meta.get('resourceVersion')}"
    return line


def observe(store: Any, watched: Sequence[Watched]) -> Observation:
    """Each watched object's line, and what is missing or not ready now (reads only)."""
    lines: list[str] = []
    problems: list[str] = []
    for item in watched:
        try:
            if item.name:
                found = store.get(item.api_version, item.kind, item.namespace, item.name)
                objects = [found] if found is not None else []
            else:
                objects = store.list(item.api_version, item.kind, item.namespace, item.label_selector)
        except NotFoundError as exc:  # the kind is not served (yet): its CRD comes with what the phase installs
            problems.append(f"{item.describe()}: {exc.msg}")
            continue
        if not objects:
            problems.append(f"{item.describe()}: not found")
            continue
        for obj in objects:
            lines.append(object_line(item, obj))
            if item.expression is not None:
                ready, value = readiness.evaluate(item.expression, obj)
                if not ready:
                    problems.append(f"{item.kind} {readiness.object_ref(obj)}: not ready (expression gave {value!r})")
    return Observation(lines=sorted(lines), problems=problems)


def read_record(store: Any, namespace: str, name: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the ConfigMap or None, its entries by phase); an entry that is not valid JSON reads as absent."""
    found = store.get(RECORD_API[0], RECORD_API[1], namespace, name)
    entries: dict[str, Any] = {}
    for key, text in ((found or {}).get("data") or {}).items():
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            entries[key] = value
    return found, entries


def decide(entry: Mapping[str, Any] | None, digest: str, observation: Observation) -> list[str]:
    """Why the phase must run in full (empty: the record still holds)."""
    if entry is None:
        return ["no record of a verified state"]
    reasons = []
    if entry.get("digest") != digest:
        reasons.append("the phase's inputs changed since it was verified")
    recorded = set(entry.get("objects") or [])
    now = set(observation.lines)
    if recorded != now:
        changed = sorted(now - recorded)
        gone = sorted(recorded - now)
        detail = [f"now {line}" for line in changed[:REASON_LIMIT]] + [f"was {line}" for line in gone[:REASON_LIMIT]]
        reasons.append("watched objects changed since it was verified: " + "; ".join(detail))
    reasons.extend(observation.problems)
    return reasons


def new_entry(digest: str, observation: Observation, now: datetime | None = None) -> dict[str, Any]:
    when = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"digest": digest, "objects": observation.lines, "verified_at": when, "by": _who()}


def _who() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user name (a container with an unknown uid) is not an error
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def same_entry(a: Mapping[str, Any] | None, b: Mapping[str, Any]) -> bool:
    return a is not None and a.get("digest") == b["digest"] and list(a.get("objects") or []) == list(b["objects"])


def write_entry(store: Any, namespace: str, name: str, phase: str, entry: Mapping[str, Any] | None) -> None:
    """Set (``entry``) or remove (None) the phase's key, under optimistic concurrency (re-read on a 409)."""
    for attempt in range(CONFLICT_RETRIES + 1):
        found, _entries = read_record(store, namespace, name)
        try:
            if found is None:
                if entry is None:
                    return
                store.create(
                    {
                        "apiVersion": RECORD_API[0],
                        "kind": RECORD_API[1],
                        "metadata": {"name": name, "namespace": namespace, "labels": dict(RECORD_LABELS)},
                        "data": {phase: json.dumps(entry, sort_keys=True)},
                    }
                )
                return
            data = dict(found.get("data") or {})
            if entry is None:
                if phase not in data:
                    return
                data.pop(phase)
            else:
                data[phase] = json.dumps(entry, sort_keys=True)
            body = {**found, "data": data}
            store.replace(body)
            return
        except Conflict:
            if attempt == CONFLICT_RETRIES:
                raise
