"""The timeline callback's logic: phases, durations on an injected clock, JSON shape, HTML/SVG, display."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from ansible import constants as C
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play import Play
from ansible.plugins.loader import callback_loader
from ansible.vars.manager import VariableManager

from ansible_collections.metalplane.inference.plugins.callback import timeline as tl


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.value = start

    def __call__(self) -> float:
        return self.value

    def advance(self, seconds: float) -> None:
        self.value += seconds


# --- phase attribution ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "phase"),
    [
        ([], "other"),
        (None, "other"),
        (["phase:provision"], "provision"),
        # Several phases on one level: the earliest in the life cycle, whatever the order Ansible lists them in.
        (["slow", "phase:storage", "phase:provision"], "provision"),
        (["phase:provision", "phase:storage", "slow"], "provision"),
        (["phase:release", "phase:claim", "phase:provision"], "claim"),
        (["phase:zeta", "phase:alpha"], "alpha"),  # custom phases alphabetically
        (["phase:zeta", "phase:smoke"], "smoke"),  # known phases before custom ones
        (["phase:GPU-Ready"], "gpu_ready"),
        (["phase:gpu_ready"], "gpu_ready"),
        (["phase:{{ state }}", "phase:teardown"], "teardown"),  # untemplated tags are skipped
        (["phase:"], "other"),
        (["phase:bad name!"], "other"),
        ([7, "phase:adoption"], "adoption"),
        (["phase:preflight"], "preflight"),  # custom phases are allowed
        (["phasex:provision", "myphase:storage"], "other"),
    ],
)
def test_phase_from_tags(tags: Any, phase: str) -> None:
    assert tl.phase_from_tags(tags) == phase


def real_tasks(play_tags: list[str], tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Real ansible Task objects of a play tagged ``play_tags``, by name, blocks flattened."""
    loader = DataLoader()
    play = Play.load(
        {"name": "p", "hosts": "all", "gather_facts": False, "tags": play_tags, "tasks": tasks},
        variable_manager=VariableManager(loader=loader),
        loader=loader,
    )
    found: dict[str, Any] = {}

    def walk(items: list[Any]) -> None:
        for item in items:
            if isinstance(getattr(item, "block", None), list):
                walk(item.block)
            else:
                found[item.name] = item

    walk(play.compile())
    return found


def test_phase_inherited_from_real_play_and_block() -> None:
    """Real ansible Task objects: play and block tags are inherited, the nearest one wins."""
    tasks = real_tasks(
        ["phase:provision"],
        [
            {"name": "plain", "debug": {"msg": 1}},
            {"name": "own", "debug": {"msg": 1}, "tags": ["phase:gpu_ready"]},
            {
                "name": "blk",
                "tags": ["phase:storage"],
                "block": [
                    {"name": "in block", "debug": {"msg": 1}},
                    {"name": "own in block", "debug": {"msg": 1}, "tags": ["phase:adoption"]},
                ],
            },
        ],
    )
    assert {name: tl.task_phase(tasks[name]) for name in ("plain", "own", "in block", "own in block")} == {
        "plain": "provision",
        "own": "gpu_ready",
        "in block": "storage",
        "own in block": "adoption",
    }


def test_a_task_with_two_phases_counts_as_the_earlier_and_an_include_of_tasks_is_not_counted() -> None:
    """Real ansible objects (the play's own phase is farther than the task's two). What the include brings in is
    checked on real runs: tests/integration/test_site_playbook.py asserts each path's phases."""
    tasks = real_tasks(
        ["phase:teardown"],
        [
            {"name": "two", "debug": {"msg": 1}, "tags": ["phase:gpu_ready", "phase:provision"]},
            {
                "name": "inc",
                "include_tasks": {"file": "x.yml", "apply": {"tags": ["phase:storage"]}},
                "tags": ["phase:release", "phase:claim"],
            },
        ],
    )
    assert tl.task_phase(tasks["two"]) == "provision"
    assert tl.is_tasks_include(tasks["inc"])
    assert not tl.is_tasks_include(tasks["two"])


def test_task_phase_survives_broken_task() -> None:
    class Broken:
        @property
        def tags(self) -> list[str]:
            raise RuntimeError("boom")

    assert tl.task_phase(Broken()) == "other"


def test_phase_order() -> None:
    assert tl.phase_order(["other", "zeta", "teardown", "provision", "alpha", "storage"]) == [
        "provision",
        "storage",
        "teardown",
        "alpha",
        "zeta",
        "other",
    ]


def test_phase_order_of_a_bare_metal_cluster() -> None:
    """The bare-metal phases in the order a host goes through them, from claim to adoption."""
    seen = ["adoption", "storage", "kubernetes", "driver", "install", "boot", "claim", "preflight", "gpu_ready"]
    assert tl.phase_order(seen) == [
        "preflight",
        "claim",
        "boot",
        "install",
        "driver",
        "kubernetes",
        "gpu_ready",
        "storage",
        "adoption",
    ]


# --- durations on an injected clock --------------------------------------------------------------


def test_durations_per_host_and_phase() -> None:
    clock = Clock()
    timeline = tl.Timeline(clock)
    clock.advance(1)
    timeline.task_started("c1", "t1", "provision")
    timeline.task_started("c2", "t1", "provision")
    clock.advance(10)
    timeline.task_finished("c1", "t1", "provision")
    clock.advance(5)
    timeline.task_finished("c2", "t1", "provision", failed=True)
    timeline.task_started("c1", "t2", "gpu_ready")
    clock.advance(2)
    timeline.task_finished("c1", "t2", "gpu_ready")
    clock.advance(1)
    timeline.finish()
    report = timeline.to_dict()
    assert report["duration"] == 19
    assert report["phases"] == ["provision", "gpu_ready"]
    c1, c2 = report["clusters"]["c1"], report["clusters"]["c2"]
    assert c1["phases"]["provision"] == {
        "seconds": 10,
        "tasks": 1,
        "failed": 0,
        "start": 1,
        "end": 11,
        "segments": [[1, 11]],
    }
    assert c1["phases"]["gpu_ready"]["seconds"] == 2
    assert c1["phases"]["gpu_ready"]["segments"] == [[16, 18]]
    assert c1["seconds"] == 12
    assert (c1["start"], c1["end"]) == (1, 18)
    assert c2["phases"] == {
        "provision": {"seconds": 15, "tasks": 1, "failed": 1, "start": 1, "end": 16, "segments": [[1, 16]]}
    }
    assert c2["failed"] == 1


def test_phase_of_the_start_event_wins() -> None:
    clock = Clock()
    timeline = tl.Timeline(clock)
    timeline.task_started("c1", "t", "storage")
    clock.advance(3)
    timeline.task_finished("c1", "t", "other")
    assert list(timeline.to_dict()["clusters"]["c1"]["phases"]) == ["storage"]


def test_consecutive_tasks_merge_into_one_bar_gaps_do_not() -> None:
    clock = Clock()
    timeline = tl.Timeline(clock)
    for gap in (0.0, 0.2, 0.4, 5.0, 0.1):
        clock.advance(gap)
        timeline.task_started("c1", f"t{gap}", "adoption")
        clock.advance(1)
        timeline.task_finished("c1", f"t{gap}", "adoption")
    record = timeline.to_dict()["clusters"]["c1"]["phases"]["adoption"]
    assert record["tasks"] == 5
    assert record["seconds"] == 5
    assert record["segments"] == [[0, 3.6], [8.6, 10.7]]


def test_fallback_start_without_runner_start() -> None:
    clock = Clock()
    timeline = tl.Timeline(clock)
    clock.advance(4)
    task_start = timeline.now()
    clock.advance(3)
    timeline.task_finished("c1", "t", "teardown", fallback_start=task_start)
    timeline.task_finished("c1", "u", "teardown")  # no start at all: zero seconds, still counted
    record = timeline.to_dict()["clusters"]["c1"]["phases"]["teardown"]
    assert record["seconds"] == 3
    assert record["tasks"] == 2


def test_finish_closes_open_tasks_as_failed() -> None:
    clock = Clock()
    timeline = tl.Timeline(clock)
    timeline.task_started("c1", "t", "storage")
    clock.advance(7)
    timeline.finish()
    record = timeline.to_dict()["clusters"]["c1"]["phases"]["storage"]
    assert (record["seconds"], record["failed"]) == (7, 1)


def _report() -> dict[str, Any]:
    clock = Clock()
    timeline = tl.Timeline(clock)
    timeline.playbooks.append("site.yml")
    for host, phases in (("vke-ewr-1", ["provision", "gpu_ready", "storage"]), ("<b>evil&co</b>", ["teardown"])):
        for phase in phases:
            timeline.task_started(host, phase, phase)
            clock.advance(2.5)
            timeline.task_finished(host, phase, phase, failed=phase == "storage")
    timeline.task_started("vke-ewr-1", "x", "other")
    clock.advance(0.25)
    timeline.task_finished("vke-ewr-1", "x", "other")
    timeline.finish()
    return timeline.to_dict()


def test_json_shape() -> None:
    report = json.loads(json.dumps(_report()))
    assert set(report) == {"version", "started", "duration", "playbooks", "phases", "clusters"}
    assert report["version"] == tl.SCHEMA_VERSION
    assert report["started"] == "2023-11-14T22:13:20+00:00"
    assert report["playbooks"] == ["site.yml"]
    assert report["phases"] == ["provision", "gpu_ready", "storage", "teardown", "other"]
    assert list(report["clusters"]) == ["<b>evil&co</b>", "vke-ewr-1"]
    cluster = report["clusters"]["vke-ewr-1"]
    assert set(cluster) == {"seconds", "start", "end", "failed", "phases", "recoveries", "smoke"}
    assert cluster["recoveries"] == []
    assert cluster["smoke"] == []
    assert list(cluster["phases"]) == ["provision", "gpu_ready", "storage", "other"]
    assert cluster["seconds"] == 7.75
    assert cluster["failed"] == 1
    for record in cluster["phases"].values():
        assert set(record) == {"seconds", "tasks", "failed", "start", "end", "segments"}
        assert 0 <= record["start"] <= record["end"] <= report["duration"]


# --- renderings ----------------------------------------------------------------------------------


def test_table() -> None:
    lines = tl.render_table(_report())
    assert lines[0].startswith("TIMELINE (seconds per cluster and phase")
    header = lines[1].split()
    assert header == ["cluster", "provision", "gpu_ready", "storage", "teardown", "other", "total"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[3:] if not line.startswith("!")}
    assert rows["vke-ewr-1"] == ["2.5", "2.5", "2.5!", "-", "0.2", "7.8"]
    assert rows["<b>evil&co</b>"] == ["-", "-", "-", "2.5", "-", "2.5"]
    assert lines[-1].startswith("! ")


def test_table_without_tasks() -> None:
    timeline = tl.Timeline(Clock())
    timeline.finish()
    assert tl.render_table(timeline.to_dict()) == ["TIMELINE: no task ran on any cluster"]


def test_html_is_self_contained_with_one_svg_per_cluster() -> None:
    page = tl.render_html(_report())
    assert page.count("<svg ") == 2
    assert page.count('<section class="cluster">') == 2
    for forbidden in ("<script", "<link", "src=", "href=", "@import", "url("):
        assert forbidden not in page
    svgs = page.split("<svg ")[1:]
    for chunk in svgs:
        ET.fromstring("<svg " + chunk.split("</svg>")[0] + "</svg>")  # each chart is well-formed XML
    # The whole page body is well-formed as XML too once the doctype is dropped.
    ET.fromstring(page.split("\n", 1)[1].replace('<meta charset="utf-8">', '<meta charset="utf-8"/>'))


def test_html_escapes_host_names() -> None:
    page = tl.render_html(_report())
    assert "<b>evil" not in page
    assert "&lt;b&gt;evil&amp;co&lt;/b&gt;" in page


def test_html_bars_and_failed_colour() -> None:
    page = tl.render_html(_report())
    vke = page.split("<h2>vke-ewr-1</h2>")[1].split("</svg>")[0]
    assert vke.count("<rect ") == 4  # provision, gpu_ready, storage, other
    assert tl._FAILED_COLOUR in vke  # storage failed
    evil = page.split("<h2>&lt;b&gt;evil&amp;co&lt;/b&gt;</h2>")[1].split("</svg>")[0]
    assert evil.count("<rect ") == 1
    assert tl._FAILED_COLOUR not in evil


@pytest.mark.parametrize(("duration", "step"), [(0.5, 0.1), (9, 1), (45, 5), (600, 60), (3000, 300), (80000, 3600 * 2)])
def test_tick_step(duration: float, step: float) -> None:
    assert tl._tick_step(duration) == step


def test_write_reports(tmp_path: Path) -> None:
    report = _report()
    paths = tl.write_reports(report, str(tmp_path / "new" / "dir"))
    assert [Path(p).name for p in paths] == ["timeline.json", "timeline.html"]
    assert json.loads(Path(paths[0]).read_text()) == report
    assert Path(paths[1]).read_text() == tl.render_html(report)
    assert sorted(p.name for p in (tmp_path / "new" / "dir").iterdir()) == ["timeline.html", "timeline.json"]


# --- the callback driven by fake events ---------------------------------------------------------


class FakeDisplay:
    def __init__(self) -> None:
        self.lines: list[tuple[str, bool]] = []
        self.warnings: list[str] = []

    def display(self, msg: str, stderr: bool = False, **_: Any) -> None:
        self.lines.append((msg, stderr))

    def warning(self, msg: str, **_: Any) -> None:
        self.warnings.append(msg)


class FakeHost:
    def __init__(self, name: str) -> None:
        self.name = name

    def get_name(self) -> str:
        return self.name


class FakeTask:
    def __init__(self, uuid: str, tags: list[str]) -> None:
        self._uuid = uuid
        self.tags = tags


class FakeResult:
    def __init__(self, host: FakeHost, task: FakeTask) -> None:
        self.host = host
        self.task = task


def _callback(options: dict[str, Any], clock: Clock) -> tuple[Any, FakeDisplay]:
    callback = callback_loader.get("metalplane.inference.timeline")
    assert callback is not None, "the collection's callback plugin is not found"
    callback.set_options(direct=options)
    callback.timeline = tl.Timeline(clock)
    display = FakeDisplay()
    callback._display = display
    return callback, display


@pytest.mark.parametrize(("stdout_callback", "to_stderr"), [("default", False), ("ansible.posix.json", True)])
def test_callback_events_to_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stdout_callback: str, to_stderr: bool
) -> None:
    monkeypatch.setattr(C, "DEFAULT_STDOUT_CALLBACK", stdout_callback)
    clock = Clock()
    callback, display = _callback({"output_dir": str(tmp_path), "show_summary": True}, clock)
    hosts = [FakeHost("c1"), FakeHost("c2")]
    provision = FakeTask("u1", ["phase:provision"])
    storage = FakeTask("u2", ["phase:storage"])
    callback.v2_playbook_on_task_start(provision, False)
    for host in hosts:
        callback.v2_runner_on_start(host, provision)
    clock.advance(4)
    callback.v2_runner_on_ok(FakeResult(hosts[0], provision))
    clock.advance(2)
    callback.v2_runner_on_failed(FakeResult(hosts[1], provision), ignore_errors=True)
    callback.v2_playbook_on_task_start(storage, False)
    clock.advance(1)
    callback.v2_runner_on_skipped(FakeResult(hosts[0], storage))  # no runner_on_start: task start is used
    callback.v2_runner_on_unreachable(FakeResult(hosts[1], storage))
    callback.v2_playbook_on_stats(None)
    report = json.loads((tmp_path / "timeline.json").read_text())
    c1, c2 = report["clusters"]["c1"]["phases"], report["clusters"]["c2"]["phases"]
    assert (c1["provision"]["seconds"], c1["provision"]["failed"]) == (4, 0)
    assert (c2["provision"]["seconds"], c2["provision"]["failed"]) == (6, 0)  # ignored errors are not failures
    assert (c1["storage"]["seconds"], c1["storage"]["failed"]) == (1, 0)
    assert (c2["storage"]["seconds"], c2["storage"]["failed"]) == (1, 1)
    assert (tmp_path / "timeline.html").read_text().count("<svg ") == 2
    table = [(line, err) for line, err in display.lines if not line.startswith("TIMELINE reports")]
    assert table[0][0].startswith("TIMELINE (seconds")
    assert all(err is to_stderr for _line, err in table)
    assert any(line.startswith("c2 ") and "1.0!" in line for line, _err in table)


def test_callback_without_output_dir_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    callback, display = _callback({"show_summary": False}, Clock())
    task = FakeTask("u", [])
    callback.v2_runner_on_start(FakeHost("c1"), task)
    callback.v2_runner_on_ok(FakeResult(FakeHost("c1"), task))
    callback.v2_playbook_on_stats(None)
    assert display.lines == []
    assert list(tmp_path.iterdir()) == []
    assert callback.timeline.to_dict()["clusters"]["c1"]["phases"]["other"]["tasks"] == 1


def test_callback_warns_when_it_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    callback, display = _callback({"output_dir": str(blocker / "sub"), "show_summary": False}, Clock())
    callback.v2_playbook_on_stats(None)
    assert len(display.warnings) == 1
    assert "could not write" in display.warnings[0]


# --- recovery events -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "kinds"),
    [
        ({}, []),
        (None, []),
        ("not a mapping", []),
        ({"recovered_by": "none", "auth_fallback": False, "reapplied": False}, []),
        ({"recovered_by": "eject_retry"}, ["eject_retry"]),
        ({"recovered_by": "bmc_reset", "auth_fallback": True}, ["bmc_reset", "auth_fallback"]),
        ({"reapplied": True, "rebooted": True}, ["reapplied"]),
        ({"auth_fallback": "yes"}, []),  # only a real true counts
        ({"recovered_by": "see <b>/etc/passwd</b> and token abc"}, ["other"]),  # free text never kept
        ({"recovered_by": ""}, []),
        (
            {"results": [{"recovered_by": "eject_retry"}, {"recovered_by": "none"}, {"recovered_by": "eject_retry"}]},
            ["eject_retry"],
        ),
        ({"results": [{"auth_fallback": True}, "junk"], "recovered_by": "bmc_reset"}, ["bmc_reset", "auth_fallback"]),
        ({"censored": "the output has been hidden due to the fact that 'no_log: true' was specified"}, []),
        ({"api_requests": {"calls": 4, "retries": 2, "total": 6}}, ["api_retry"]),
        ({"api_requests": {"calls": 4, "retries": 0, "total": 4}}, []),
        ({"api_requests": {"retries": True}}, []),  # only a count counts
        ({"api_requests": "6"}, []),
        ({"attempts": 3, "changed": True}, ["task_retry"]),  # a task retried with until (a busy API server)
        ({"attempts": 1}, []),
        ({"results": [{"attempts": 1}, {"attempts": 2}]}, ["task_retry"]),
    ],
)
def test_recoveries_in(result: Any, kinds: list[str]) -> None:
    assert tl.recoveries_in(result) == kinds


class NamedTask:
    def __init__(self, uuid: str, tags: list[str], name: Any) -> None:
        self._uuid = uuid
        self.tags = tags
        self.name = name

    def get_name(self) -> str:
        if isinstance(self.name, Exception):
            raise self.name
        return self.name


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("insert the ISO", "insert the ISO"),
        ("  two\n lines  ", "two lines"),
        ("", "?"),
        (RuntimeError("broken"), "?"),
        ("x" * 300, "x" * (tl.MAX_TASK_NAME - 3) + "..."),
    ],
)
def test_task_name(name: Any, shown: str) -> None:
    assert tl.task_name(NamedTask("u", [], name)) == shown


class ResultWith(FakeResult):
    def __init__(self, host: FakeHost, task: Any, result: dict[str, Any]) -> None:
        super().__init__(host, task)
        self._result = result


def test_callback_records_recoveries_per_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "DEFAULT_STDOUT_CALLBACK", "default")
    clock = Clock()
    callback, display = _callback({"output_dir": str(tmp_path), "show_summary": True}, clock)
    r730, r740 = FakeHost("r730"), FakeHost("r740")
    insert = NamedTask("u1", ["phase:provision"], "insert <iso>")
    order = NamedTask("u2", ["phase:provision"], "boot order")
    info = NamedTask("u3", ["phase:gpu_ready"], "info")
    for host in (r730, r740):
        callback.v2_runner_on_start(host, insert)
    clock.advance(3)
    callback.v2_runner_on_ok(ResultWith(r730, insert, {"changed": True, "recovered_by": "bmc_reset"}))
    callback.v2_runner_on_ok(ResultWith(r740, insert, {"changed": True, "recovered_by": "none"}))
    callback.v2_runner_on_start(r730, order)
    clock.advance(2)
    callback.v2_runner_on_failed(
        ResultWith(r730, order, {"failed": True, "reapplied": True, "auth_fallback": True}), ignore_errors=True
    )
    callback.v2_runner_on_start(r740, info)
    clock.advance(1)
    callback.v2_runner_on_ok(ResultWith(r740, info, {"auth_fallback": False}))
    callback.v2_runner_on_skipped(ResultWith(r740, info, {"skipped": True, "recovered_by": "eject_retry"}))
    callback.v2_playbook_on_stats(None)

    report = json.loads((tmp_path / "timeline.json").read_text())
    assert report["clusters"]["r730"]["recoveries"] == [
        {"task": "insert <iso>", "phase": "provision", "at": 3.0, "recovered_by": "bmc_reset"},
        {"task": "boot order", "phase": "provision", "at": 5.0, "recovered_by": "auth_fallback"},
        {"task": "boot order", "phase": "provision", "at": 5.0, "recovered_by": "reapplied"},
    ]
    assert report["clusters"]["r740"]["recoveries"] == []  # "none", false and skipped results are not events

    lines = [line for line, _err in display.lines]
    heading = next(i for i, line in enumerate(lines) if line.startswith("RECOVERIES (3:"))
    rows = [line.split(None, 4) for line in lines[heading + 1 : heading + 4]]
    assert rows == [
        ["r730", "3.0s", "provision", "bmc_reset", "insert <iso>"],
        ["r730", "5.0s", "provision", "auth_fallback", "boot order"],
        ["r730", "5.0s", "provision", "reapplied", "boot order"],
    ]

    page = (tmp_path / "timeline.html").read_text()
    r730_chart = page.split("<h2>r730</h2>")[1].split("</section>")[0]
    assert r730_chart.count('<polygon class="recovery"') == 3
    assert "insert &lt;iso&gt;" in r730_chart
    assert "insert <iso>" not in page
    assert r730_chart.count("<li>") == 3
    r740_chart = page.split("<h2>r740</h2>")[1].split("</section>")[0]
    assert "recovery" not in r740_chart
    svg = r730_chart.split("<svg ", 1)[1].split("</svg>")[0]
    ET.fromstring("<svg " + svg + "</svg>")  # markers keep the chart well-formed


def test_table_without_recoveries_has_no_recovery_line() -> None:
    assert not any(line.startswith("RECOVERIES") for line in tl.render_table(_report()))


# --- the serving smoke test's request and answer ---------------------------------------------------


@pytest.mark.parametrize(
    ("result", "event"),
    [
        ({}, None),
        (None, None),
        ({"smoke": "yes"}, None),
        ({"smoke": {"answer": "hi"}}, None),  # no request line: not a smoke result
        (
            {"smoke": {"request": "POST http://gw/ns/s/v1/chat/completions model=m", "answer": "Hello  there\n"}},
            {"request": "POST http://gw/ns/s/v1/chat/completions model=m", "answer": "Hello there"},
        ),
        (
            {"smoke": {"request": "POST " + "x" * 300, "answer": None}},
            {"request": ("POST " + "x" * 300)[: tl.MAX_SMOKE_TEXT - 3] + "...", "answer": ""},
        ),
    ],
)
def test_smoke_in(result: Any, event: dict[str, str] | None) -> None:
    assert tl.smoke_in(result) == event


def test_callback_records_the_smoke_answer_under_phase_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "DEFAULT_STDOUT_CALLBACK", "default")
    clock = Clock()
    callback, display = _callback({"output_dir": str(tmp_path), "show_summary": True}, clock)
    host = FakeHost("vke-ewr-1")
    smoke = NamedTask("u1", ["phase:smoke"], "smoke")
    callback.v2_runner_on_start(host, smoke)
    clock.advance(4)
    request = "POST http://127.0.0.1:9/default/smoke-vke-ewr-1/v1/chat/completions model=qwen"
    answer = "Hello <b>from</b> vke-ewr-1"
    callback.v2_runner_on_ok(
        ResultWith(host, smoke, {"changed": False, "smoke": {"request": request, "answer": answer}})
    )
    callback.v2_playbook_on_stats(None)

    report = json.loads((tmp_path / "timeline.json").read_text())
    assert report["phases"] == ["smoke"]
    assert report["clusters"]["vke-ewr-1"]["smoke"] == [
        {"phase": "smoke", "at": 4.0, "request": request, "answer": answer}
    ]
    lines = [line for line, _err in display.lines]
    heading = lines.index("SMOKE (a chat completion through the gateway, answered)")
    assert request in lines[heading + 1]
    assert lines[heading + 2].endswith(f"-> {answer}")
    page = (tmp_path / "timeline.html").read_text()
    assert "Hello &lt;b&gt;from&lt;/b&gt; vke-ewr-1" in page
    assert "<b>from</b>" not in page
