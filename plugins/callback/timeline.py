# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Seconds spent per cluster and per phase, as a table, a JSON file and an HTML/SVG report.

Why: "how long does a GPU cluster take to become inference-ready, and where does the time go" is
the question every run of this collection answers. Each inventory host is one cluster, and each
task declares its phase with a ``phase:<name>`` tag, so the timeline needs nothing from the roles
but a tag, works with any strategy and fork count, and never reads a task's arguments. From a
result it reads only the keys that say a recovery was needed (``recovered_by``, ``auth_fallback``,
``reapplied``: the modules report them so a playbook and a timeline can show them), keeps their
values only when they are short identifiers, and names the task only then; and the ``smoke`` key of
``modelplane_smoke`` (the request line and the answer's first tokens, shortened), because "the cluster
answered this" is what the run proves. Otherwise the reports hold host names, phase names, counts,
durations and those events; a chat request and a model's answer carry no credential.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: timeline
type: aggregate
short_description: Seconds per cluster and phase, as a summary table, a JSON file and an HTML/SVG report
description:
  - Records, for each inventory host (one host is one cluster) and each phase, the seconds its tasks took.
  - A task declares its phase with a tag C(phase:<name>) on the task, or on an enclosing block, C(import_tasks),
    role or play (tags are inherited; the nearest one wins; of several phases on one level, the earliest in the list
    below). Tasks without one count as phase C(other). C(include_tasks) tasks are not counted (the tasks they include
    are).
  - Known phases, shown in this order, are C(preflight), C(lock), C(claim), C(boot), C(install), C(recovery),
    C(driver), C(kubernetes) (bare metal), C(provision), C(gpu_ready), C(storage), C(adoption), C(smoke),
    C(teardown), C(wipe) and C(release); other names (lower-case letters, digits, C(_) and C(-), which is read as
    C(_)) are accepted and shown after them.
  - At the end of the run a table is printed (to standard error instead of standard output when the stdout callback
    writes JSON, so that output stays parseable).
  - When O(output_dir) is set, C(timeline.json) and C(timeline.html) (a self-contained page with one inline SVG
    Gantt-like chart per cluster, no external JavaScript or CSS) are written there, overwriting the previous run's.
  - Tasks whose result says a recovery was needed are listed per host as recovery events (task name, phase, time
    and kind) in the table, the JSON file and the chart. The kinds come from the result keys C(recovered_by)
    (M(metalplane.inference.redfish_virtual_media), any value but C(none)), C(auth_fallback) (every Redfish
    module, when true), C(reapplied) (M(metalplane.inference.redfish_boot), when true), C(api_retry) (every module of
    this collection, when C(api_requests.retries) is above zero, so the Vultr or a Kubernetes API answered 429 or 5xx
    and was asked again) and C(task_retry) (a task retried with C(until), as the roles retry their kubernetes.core
    tasks while the API server answers busy, when C(attempts) is above one).
  - The serving smoke test's result key C(smoke) (M(metalplane.inference.modelplane_smoke) - the request line and
    the answer's first tokens, each shortened to 200 characters) is shown per host as a smoke event.
  - Otherwise the reports contain host names, phase names, task counts and durations only; never task arguments
    or other result values.
requirements:
  - Enabled with C(callbacks_enabled = metalplane.inference.timeline) in C(ansible.cfg) or
    C(ANSIBLE_CALLBACKS_ENABLED=metalplane.inference.timeline).
options:
  output_dir:
    description:
      - Directory where C(timeline.json) and C(timeline.html) are written (created if missing).
      - When unset, no file is written and only the summary table is shown.
    type: path
    env:
      - name: METALPLANE_TIMELINE_DIR
    ini:
      - section: callback_timeline
        key: output_dir
  show_summary:
    description: Print the summary table at the end of the run.
    type: bool
    default: true
    env:
      - name: METALPLANE_TIMELINE_SUMMARY
    ini:
      - section: callback_timeline
        key: show_summary
"""

import html
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ansible import constants as C
from ansible.plugins.callback import CallbackBase

# The phases of a cluster's life, in the order they happen: the ``phase:<name>`` tags the roles put on their
# tasks (docs/timeline.md, "The phase contract").
PHASES = (
    "preflight",
    "lock",
    "claim",
    "boot",
    "install",
    "recovery",
    "driver",
    "kubernetes",
    "provision",
    "gpu_ready",
    "storage",
    "adoption",
    "smoke",
    "teardown",
    "wipe",
    "release",
)
# Where tasks without a phase tag go; always shown last.
OTHER = "other"
# The tag that declares a phase: phase:<name>.
PHASE_TAG_PREFIX = "phase:"
_PHASE_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")
# Consecutive tasks closer than this (seconds) are drawn as one bar, which keeps the SVG small.
MERGE_GAP = 0.5
# Version of the JSON document; bump on an incompatible change.
SCHEMA_VERSION = 1
JSON_FILE = "timeline.json"
HTML_FILE = "timeline.html"
# Result keys that say a task needed a recovery (the modules' RETURN docs):
#   recovered_by   redfish_virtual_media: none | eject_retry | bmc_reset; host_provision: none | power_on |
#                  media_reinserted (the kind is the value)
#   auth_fallback  every Redfish module: true when a write HTTP Basic was refused got a session
#   reapplied      redfish_boot: true when the BMC reverted the boot order and it was written again
#   api_requests   every module: {"retries": N, ...}; N > 0 means the Vultr or a Kubernetes API answered 429/5xx and
#                  was asked again
#   attempts       Ansible, on a task with ``until``: above 1 means the task ran again (the roles' busy-API retries)
RECOVERED_BY = "recovered_by"
RECOVERY_FLAGS = ("auth_fallback", "reapplied")
API_REQUESTS = "api_requests"
API_RETRY = "api_retry"
ATTEMPTS = "attempts"
TASK_RETRY = "task_retry"
NO_RECOVERY = "none"
# A recovery kind is kept only when it looks like an identifier; anything else is reported as
# ``other``, so no free text from a result can reach the reports.
_RECOVERY_KIND = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# Longest task name kept for a recovery event.
MAX_TASK_NAME = 120
# modelplane_smoke's result key: {request: "POST <url> model=<name>", answer: "<first tokens>"}.
SMOKE_KEY = "smoke"
# Longest request line or answer kept for a smoke event.
MAX_SMOKE_TEXT = 200
# Stdout callbacks whose output is a machine-readable document the table must not corrupt.
_MACHINE_STDOUT = re.compile(r"json", re.IGNORECASE)


def phase_from_tags(tags: Iterable[Any]) -> str:
    """The phase that one level's ``phase:<name>`` tags name, or ``other``; of several, the earliest in the life cycle.

    Why the earliest and not the first: Ansible keeps a level's own tags as a set, so their order differs between runs
    (a task tagged ``phase:provision`` and ``phase:gpu_ready`` listed them either way round); the life-cycle order is
    the same every run. Custom phases come after the known ones, alphabetically."""
    names = []
    for tag in tags or ():
        text = str(tag)
        if not text.startswith(PHASE_TAG_PREFIX) or "{{" in text:
            continue
        name = text[len(PHASE_TAG_PREFIX) :].strip().lower().replace("-", "_")
        if _PHASE_NAME.match(name):
            names.append(name)
    return phase_order(names)[0] if names else OTHER


def _own_tags(item: Any) -> list[Any]:
    """The tags written on this level itself (Ansible keeps them in ``_tags``; ``tags`` adds the inherited ones)."""
    own = getattr(item, "_tags", None)
    return list(own) if isinstance(own, list | tuple) else []


def _levels(task: Any) -> list[Any]:
    """The task, then each enclosing block and include, then the role of a ``roles:`` entry and the play."""
    levels, item = [], task
    while item is not None and len(levels) < 64:  # a guard against a cycle, never reached by real plays
        levels.append(item)
        parent = getattr(item, "_parent", None)
        if parent is None:
            levels.extend(level for level in (getattr(item, "_role", None), getattr(item, "_play", None)) if level)
        item = parent
    return levels


def task_phase(task: Any) -> str:
    """The phase of an Ansible Task: that of the nearest level (the task, then each enclosing block, include, role and
    play) whose own tags name one."""
    try:
        levels = _levels(task)
        if not any(_own_tags(level) for level in levels):
            # Not a real Task (or one from an Ansible that keeps tags elsewhere): its flat tag list, own ones first.
            tags = task.tags
            return phase_from_tags(tags if isinstance(tags, list | tuple) else [])
    except Exception:  # a callback must never break the run
        return OTHER
    for level in levels:
        phase = phase_from_tags(_own_tags(level))
        if phase != OTHER:
            return phase
    return OTHER


def is_tasks_include(task: Any) -> bool:
    """An ``include_tasks`` task: it takes no time of its own and the tasks it includes carry their own phases, so it
    is not counted (site.yml's converge include names every phase of both paths, which no one phase describes)."""
    return str(getattr(task, "action", "") or "").rsplit(".", 1)[-1] == "include_tasks"


def recoveries_in(result: Any) -> list[str]:
    """The recovery kinds a task result reports, in order and without repeats (pure).

    ``recovered_by`` values other than ``none``, the true ``auth_fallback``/``reapplied`` flags, ``api_retry``
    when ``api_requests.retries`` is above zero and ``task_retry`` when ``attempts`` is above one, read from the result
    and, for a loop, from each item's result.
    Never raises.
    """
    if not isinstance(result, Mapping):
        return []
    items: list[Mapping[str, Any]] = [result]
    loop = result.get("results")
    if isinstance(loop, list):
        items.extend(item for item in loop if isinstance(item, Mapping))
    found: list[str] = []
    for item in items:
        value = item.get(RECOVERED_BY)
        if isinstance(value, str) and value and value != NO_RECOVERY:
            found.append(value if _RECOVERY_KIND.match(value) else OTHER)
        found.extend(flag for flag in RECOVERY_FLAGS if item.get(flag) is True)
        counts = item.get(API_REQUESTS)
        retries = counts.get("retries") if isinstance(counts, Mapping) else None
        if isinstance(retries, int) and not isinstance(retries, bool) and retries > 0:
            found.append(API_RETRY)
        attempts = item.get(ATTEMPTS)
        if isinstance(attempts, int) and not isinstance(attempts, bool) and attempts > 1:
            found.append(TASK_RETRY)
    return list(dict.fromkeys(found))


def _short(value: Any) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_SMOKE_TEXT else text[: MAX_SMOKE_TEXT - 3] + "..."


def smoke_in(result: Any) -> dict[str, str] | None:
    """The smoke test's request line and answer from a result (``smoke`` key), shortened; None without (pure)."""
    if not isinstance(result, Mapping):
        return None
    smoke = result.get(SMOKE_KEY)
    if not isinstance(smoke, Mapping) or not isinstance(smoke.get("request"), str):
        return None
    return {"request": _short(smoke["request"]), "answer": _short(smoke.get("answer") or "")}


def task_name(task: Any) -> str:
    """A task's name for a recovery event (shortened); ``?`` when it cannot be read."""
    try:
        name = str(task.get_name()).strip()
    except Exception:  # a callback must never break the run
        name = ""
    name = " ".join(name.split()) or "?"
    return name if len(name) <= MAX_TASK_NAME else name[: MAX_TASK_NAME - 3] + "..."


def phase_order(phases: Iterable[str]) -> list[str]:
    """Known phases in life-cycle order, then custom ones alphabetically, then ``other``."""
    present = set(phases)
    custom = sorted(p for p in present if p not in PHASES and p != OTHER)
    return [p for p in PHASES if p in present] + custom + ([OTHER] if OTHER in present else [])


@dataclass
class PhaseRecord:
    """Time one cluster spent in one phase. Offsets are seconds from the start of the run."""

    seconds: float = 0.0
    tasks: int = 0
    failed: int = 0
    segments: list[list[float]] = field(default_factory=list)

    def add(self, start: float, end: float, *, failed: bool) -> None:
        end = max(end, start)
        self.seconds += end - start
        self.tasks += 1
        self.failed += int(failed)
        if self.segments and start - self.segments[-1][1] <= MERGE_GAP and start >= self.segments[-1][0]:
            self.segments[-1][1] = max(self.segments[-1][1], end)
        else:
            self.segments.append([start, end])

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 3),
            "tasks": self.tasks,
            "failed": self.failed,
            "start": round(min(seg[0] for seg in self.segments), 3) if self.segments else None,
            "end": round(max(seg[1] for seg in self.segments), 3) if self.segments else None,
            "segments": [[round(s, 3), round(e, 3)] for s, e in self.segments],
        }


class Timeline:
    """The pure bookkeeping: which host spent how long in which phase. The clock is injectable."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.started = clock()
        self.finished: float | None = None
        self.playbooks: list[str] = []
        self._open: dict[tuple[str, str], tuple[float, str]] = {}
        self.clusters: dict[str, dict[str, PhaseRecord]] = {}
        self.recoveries: dict[str, list[dict[str, Any]]] = {}
        self.smoke: dict[str, list[dict[str, Any]]] = {}

    def now(self) -> float:
        return self._clock() - self.started

    def task_started(self, host: str, task_id: str, phase: str) -> None:
        self._open[(host, task_id)] = (self.now(), phase)

    def task_finished(
        self, host: str, task_id: str, phase: str, *, failed: bool = False, fallback_start: float | None = None
    ) -> None:
        """Close a task on a host; without a start (no runner_on_start), the task's start is used."""
        end = self.now()
        start, started_phase = self._open.pop(
            (host, task_id), (fallback_start if fallback_start is not None else end, phase)
        )
        self.clusters.setdefault(host, {}).setdefault(started_phase, PhaseRecord()).add(start, end, failed=failed)

    def recovered(self, host: str, task: str, phase: str, kinds: Iterable[str]) -> None:
        """Record that ``task`` on ``host`` needed the recoveries ``kinds`` (at the current time)."""
        at = round(self.now(), 3)
        for kind in kinds:
            self.recoveries.setdefault(host, []).append({"task": task, "phase": phase, "at": at, "recovered_by": kind})

    def smoked(self, host: str, phase: str, smoke: Mapping[str, str]) -> None:
        """Record the smoke test's request and answer on ``host`` (at the current time)."""
        event = {"phase": phase, "at": round(self.now(), 3), "request": smoke["request"], "answer": smoke["answer"]}
        self.smoke.setdefault(host, []).append(event)

    def finish(self) -> None:
        """End of the run: tasks still open (interrupted, unreachable mid-way) are closed now."""
        for (host, task_id), (_start, phase) in list(self._open.items()):
            self.task_finished(host, task_id, phase, failed=True)
        self.finished = self.now()

    def to_dict(self) -> dict[str, Any]:
        duration = self.finished if self.finished is not None else self.now()
        clusters: dict[str, Any] = {}
        for host in sorted(self.clusters):
            records = self.clusters[host]
            phases = {name: records[name].to_dict() for name in phase_order(records)}
            starts = [p["start"] for p in phases.values() if p["start"] is not None]
            ends = [p["end"] for p in phases.values() if p["end"] is not None]
            clusters[host] = {
                "seconds": round(sum(r.seconds for r in records.values()), 3),
                "start": min(starts) if starts else None,
                "end": max(ends) if ends else None,
                "failed": sum(r.failed for r in records.values()),
                "phases": phases,
                "recoveries": [dict(event) for event in self.recoveries.get(host, [])],
                "smoke": [dict(event) for event in self.smoke.get(host, [])],
            }
        return {
            "version": SCHEMA_VERSION,
            "started": datetime.fromtimestamp(self.started, UTC).isoformat(timespec="seconds"),
            "duration": round(duration, 3),
            "playbooks": list(self.playbooks),
            "phases": phase_order(p for c in self.clusters.values() for p in c),
            "clusters": clusters,
        }


# --- renderings ------------------------------------------------------------------------------------


def render_table(report: dict[str, Any]) -> list[str]:
    """Fixed-width lines: one row per cluster, one column per phase, then the total (seconds)."""
    phases = report["phases"]
    clusters = report["clusters"]
    if not clusters:
        return ["TIMELINE: no task ran on any cluster"]
    width = max(len("cluster"), *(len(h) for h in clusters))
    cols = [max(len(p), 9) for p in phases]
    header = "cluster".ljust(width) + "".join(f"  {p:>{w}}" for p, w in zip(phases, cols, strict=True)) + "      total"
    lines = [f"TIMELINE (seconds per cluster and phase, run {report['duration']:.1f}s)", header, "-" * len(header)]
    for host, data in clusters.items():
        cells = []
        for phase, w in zip(phases, cols, strict=True):
            record = data["phases"].get(phase)
            text = "-" if record is None else f"{record['seconds']:.1f}" + ("!" if record["failed"] else "")
            cells.append(f"  {text:>{w}}")
        lines.append(host.ljust(width) + "".join(cells) + f"  {data['seconds']:>9.1f}")
    if any(c["failed"] for c in clusters.values()):
        lines.append("! a task of this phase failed or did not finish")
    events = [(host, event) for host, data in clusters.items() for event in data.get("recoveries", [])]
    answers = [(host, event) for host, data in clusters.items() for event in data.get("smoke", [])]
    if answers:
        lines.append("SMOKE (a chat completion through the gateway, answered)")
        for host, event in answers:
            lines.append(f"{host.ljust(width)}  {event['at']:>7.1f}s  {event['request']}")
            lines.append(f"{' ' * width}  {'':>8}  -> {event['answer']}")
    if events:
        lines.append(f"RECOVERIES ({len(events)}: a task needed a recovery; see its result)")
        for host, event in events:
            lines.append(
                f"{host.ljust(width)}  {event['at']:>7.1f}s  {event['phase']:<9}  {event['recovered_by']:<13}"
                f"  {event['task']}"
            )
    return lines


# Phase colours (colour-blind-safe palette); custom phases cycle through the spare ones.
_COLOURS = {
    "preflight": "#bbbbbb",
    "lock": "#dddddd",
    "provision": "#0072b2",
    "gpu_ready": "#009e73",
    "storage": "#e69f00",
    "adoption": "#cc79a7",
    "smoke": "#d55e00",
    "teardown": "#56b4e9",
    OTHER: "#999999",
}
_SPARE_COLOURS = ("#f0e442", "#6a3d9a", "#b15928", "#1b9e77")
_FAILED_COLOUR = "#d62728"
# Recovery markers (a diamond on the phase's row at the task's end): black stands out on every bar.
_RECOVERY_COLOUR = "#000000"
_SVG_WIDTH = 960
_LABEL_WIDTH = 110
# Room on the right for each row's total seconds.
_TOTAL_WIDTH = 70
_ROW = 26
_AXIS = 28


def _colour(phase: str, custom: list[str]) -> str:
    if phase in _COLOURS:
        return _COLOURS[phase]
    return _SPARE_COLOURS[custom.index(phase) % len(_SPARE_COLOURS)] if phase in custom else _COLOURS[OTHER]


def _tick_step(duration: float) -> float:
    """A round tick interval giving about 5 to 10 ticks."""
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200):
        if duration / step <= 10:
            return step
    return 3600 * max(1, round(duration / 36000))


def render_svg(host: str, data: dict[str, Any], duration: float, custom: list[str]) -> str:
    """One cluster's chart: a row per phase, a bar per stretch of consecutive tasks, a time axis."""
    esc = html.escape
    span = max(duration, 1e-3)
    plot = _SVG_WIDTH - _LABEL_WIDTH - _TOTAL_WIDTH
    phases = list(data["phases"])
    height = _ROW * len(phases) + _AXIS + 8

    def x(offset: float) -> float:
        return _LABEL_WIDTH + plot * max(0.0, min(offset, span)) / span

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="gantt" width="{_SVG_WIDTH}" height="{height}" '
        f'viewBox="0 0 {_SVG_WIDTH} {height}" role="img" aria-label="timeline of {esc(host)}" '
        'font-family="sans-serif">',
        f"<title>{esc(host)}</title>",
    ]
    step = _tick_step(span)
    for index in range(int(span / step + 1e-9) + 1):
        tick = round(index * step, 6)
        tx = x(tick)
        parts.append(f'<line x1="{tx:.1f}" y1="0" x2="{tx:.1f}" y2="{height - _AXIS + 4}" stroke="#e5e5e5"/>')
        parts.append(
            f'<text x="{tx:.1f}" y="{height - 8}" font-size="11" fill="#666" text-anchor="middle">{tick:g}s</text>'
        )
    for row, phase in enumerate(phases):
        record = data["phases"][phase]
        y = row * _ROW + 4
        parts.append(f'<text x="4" y="{y + _ROW / 2 + 4:.1f}" font-size="12" fill="#222">{esc(phase)}</text>')
        fill = _FAILED_COLOUR if record["failed"] else _colour(phase, custom)
        for start, end in record["segments"]:
            width = max(x(end) - x(start), 1.0)
            parts.append(
                f'<rect x="{x(start):.1f}" y="{y}" width="{width:.1f}" height="{_ROW - 8}" fill="{fill}">'
                f"<title>{esc(phase)}: {start:.1f}s to {end:.1f}s ({end - start:.1f}s)</title></rect>"
            )
        parts.append(
            f'<text x="{_SVG_WIDTH - 4}" y="{y + _ROW / 2 + 4:.1f}" font-size="11" fill="#444" text-anchor="end">'
            f"{record['seconds']:.1f}s</text>"
        )
    rows = {phase: row for row, phase in enumerate(phases)}
    for event in data.get("recoveries", []):
        row = rows.get(event["phase"])
        if row is None:
            continue
        mx, my, r = x(event["at"]), row * _ROW + 4 + (_ROW - 8) / 2, (_ROW - 8) / 2
        parts.append(
            f'<polygon class="recovery" points="{mx:.1f},{my - r:.1f} {mx + r:.1f},{my:.1f} {mx:.1f},{my + r:.1f} '
            f'{mx - r:.1f},{my:.1f}" fill="{_RECOVERY_COLOUR}" stroke="#fff" stroke-width="1">'
            f"<title>recovery {esc(event['recovered_by'])} at {event['at']:.1f}s: {esc(event['task'])}</title>"
            "</polygon>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-bottom: 2em; }
th, td { padding: 0.3em 0.8em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.failed { color: #d62728; font-weight: bold; }
ul.recoveries, ul.smoke { margin-top: -1em; margin-bottom: 1.5em; }
svg.gantt { display: block; margin-bottom: 1.5em; }
"""


def render_html(report: dict[str, Any]) -> str:
    """A self-contained page: the summary table and one inline SVG per cluster (no external files)."""
    esc = html.escape
    phases = report["phases"]
    custom = [p for p in phases if p not in _COLOURS]
    head = "".join(f"<th>{esc(p)}</th>" for p in phases)
    rows = []
    for host, data in report["clusters"].items():
        cells = []
        for phase in phases:
            record = data["phases"].get(phase)
            if record is None:
                cells.append("<td>-</td>")
            else:
                css = ' class="failed"' if record["failed"] else ""
                cells.append(f"<td{css}>{record['seconds']:.1f}</td>")
        rows.append(f"<tr><td>{esc(host)}</td>{''.join(cells)}<td>{data['seconds']:.1f}</td></tr>")
    charts = [
        f'<section class="cluster"><h2>{esc(host)}</h2>\n{render_svg(host, data, report["duration"], custom)}'
        f"{_smoke_list(data)}{_recovery_list(data)}</section>"
        for host, data in report["clusters"].items()
    ]
    playbooks = ", ".join(esc(p) for p in report["playbooks"]) or "-"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        "<title>metalplane.inference timeline</title>"
        f"<style>{_STYLE}</style></head><body>\n"
        "<h1>metalplane.inference timeline</h1>\n"
        f"<p>Run started {esc(report['started'])}, {report['duration']:.1f}s, playbooks: {playbooks}. "
        "Seconds per cluster and phase; red marks a phase with a failed or unfinished task, a black diamond a task "
        "that needed a recovery.</p>\n"
        f"<table><thead><tr><th>cluster</th>{head}<th>total</th></tr></thead>\n"
        f"<tbody>{''.join(rows)}</tbody></table>\n" + "\n".join(charts) + "\n</body></html>\n"
    )


def _smoke_list(data: dict[str, Any]) -> str:
    """The cluster's answered smoke requests under its chart ("" when there were none)."""
    events = data.get("smoke") or []
    if not events:
        return ""
    esc = html.escape
    items = "".join(
        f"<li>{event['at']:.1f}s, smoke: <code>{esc(event['request'])}</code> answered "
        f"<q>{esc(event['answer'])}</q></li>"
        for event in events
    )
    return f'\n<ul class="smoke">{items}</ul>'


def _recovery_list(data: dict[str, Any]) -> str:
    """The cluster's recovery events under its chart ("" when there were none)."""
    events = data.get("recoveries") or []
    if not events:
        return ""
    esc = html.escape
    items = "".join(
        f"<li>{event['at']:.1f}s, {esc(event['phase'])}: <strong>{esc(event['recovered_by'])}</strong> in task "
        f"{esc(event['task'])}</li>"
        for event in events
    )
    return f'\n<ul class="recoveries">{items}</ul>'


def write_reports(report: dict[str, Any], directory: str) -> list[str]:
    """Write timeline.json and timeline.html atomically into ``directory``; return their paths."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for name, text in ((JSON_FILE, json.dumps(report, indent=2) + "\n"), (HTML_FILE, render_html(report))):
        path = os.path.join(directory, name)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        written.append(path)
    return written


# --- the callback ----------------------------------------------------------------------------------


def _result_host_task(result: Any) -> tuple[str, Any]:
    host = getattr(result, "host", None) or result._host
    task = getattr(result, "task", None) or result._task
    return host.get_name(), task


class CallbackModule(CallbackBase):
    """Feeds the Timeline from task events and writes the reports when the run ends."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "metalplane.inference.timeline"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display: Any = None, options: Any = None, clock: Callable[[], float] = time.time) -> None:
        super().__init__(display=display, options=options)
        self.timeline = Timeline(clock)
        self._task_starts: dict[str, float] = {}

    # Task start: the fallback start for hosts that report no runner_on_start.
    def v2_playbook_on_start(self, playbook: Any) -> None:
        name = os.path.basename(str(getattr(playbook, "_file_name", "") or ""))
        if name:
            self.timeline.playbooks.append(name)

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._task_starts[task._uuid] = self.timeline.now()

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self._task_starts[task._uuid] = self.timeline.now()

    def v2_runner_on_start(self, host: Any, task: Any) -> None:
        if not is_tasks_include(task):
            self.timeline.task_started(host.get_name(), task._uuid, task_phase(task))

    def _finished(self, result: Any, *, failed: bool) -> None:
        host, task = _result_host_task(result)
        if is_tasks_include(task):
            return
        self.timeline.task_finished(
            host, task._uuid, task_phase(task), failed=failed, fallback_start=self._task_starts.get(task._uuid)
        )

    def _recoveries(self, result: Any) -> None:
        """Recovery events the result reports (``recovered_by``, ``auth_fallback``, ``reapplied``)."""
        kinds = recoveries_in(getattr(result, "_result", None))
        if kinds:
            host, task = _result_host_task(result)
            self.timeline.recovered(host, task_name(task), task_phase(task), kinds)

    def _smoke(self, result: Any) -> None:
        """The smoke test's request and answer (``smoke``), when the task reports one."""
        smoke = smoke_in(getattr(result, "_result", None))
        if smoke is not None:
            host, task = _result_host_task(result)
            self.timeline.smoked(host, task_phase(task), smoke)

    def v2_runner_on_ok(self, result: Any) -> None:
        self._finished(result, failed=False)
        self._recoveries(result)
        self._smoke(result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._finished(result, failed=not ignore_errors)
        self._recoveries(result)

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._finished(result, failed=False)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._finished(result, failed=True)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self.timeline.finish()
        report = self.timeline.to_dict()
        if self.get_option("show_summary"):
            to_stderr = bool(_MACHINE_STDOUT.search(str(C.DEFAULT_STDOUT_CALLBACK or "")))
            for line in render_table(report):
                self._display.display(line, stderr=to_stderr)
        directory = self.get_option("output_dir")
        if directory:
            try:
                paths = write_reports(report, directory)
            except OSError as exc:
                self._display.warning(f"timeline: could not write the reports to {directory}: {exc}")
            else:
                self._display.display(f"TIMELINE reports: {', '.join(paths)}", stderr=True)
