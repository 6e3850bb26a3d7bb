"""The out-of-process Vultr emulator checks the overlay contract (``--contract``), and labctl reports it.

In-process emulators fail a test on a contract violation (``assert_no_violations``). The emulator
that labctl starts for molecule and ``make demo`` runs the same check (``VultrEmulator.handle``) when
started with ``--contract``: each violation is one ``CONTRACT VIOLATION: <method> <path>: <reason>``
line on stderr, is kept in ``<state-dir>/vultr-contract.json`` and is served by ``GET /lab/contract``;
``labctl status`` shows the counts and ``labctl down`` fails when one was recorded.

Violations are provoked two ways: a request the overlay rejects (an undeclared query parameter) and
an answer it rejects (the ``undocumented_field`` fault adds a field the spec does not document).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from lab.common.emulator import LOOPBACK, free_port, lab_command, lab_environment
from lab.common.registry import EMULATORS, VULTR_STATE, _vultr_endpoint, vultr_contract_args
from lab.vultr.contract import CONTRACT_REPORT, OVERLAY, VIOLATION_PREFIX, contract_or_skip

REPO = Path(__file__).resolve().parents[3]
LAB_VERIFY = REPO / "extensions" / "molecule" / "lab" / "verify.yml"
LAB_INVENTORY = REPO / "inventories" / "lab"
VERIFY_PLAY = "Verify the Vultr emulator saw only exchanges the Vultr API spec allows"
AUTH = {"Authorization": "Bearer lab-vultr-api-key"}
TIMEOUT = 10
START_TIMEOUT = 30.0  # seconds for the emulator to listen (a deadline for the wait, not a measurement)
BOGUS_QUERY = "undeclared query parameter 'bogus'"
CLUSTER = {
    "label": "contract",
    "region": "ewr",
    "version": "v1.36.2+1",
    "node_pools": [{"node_quantity": 1, "label": "system", "plan": "vc2-6c-16gb"}],
}


def wait_listening(port: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        with socket.socket() as sock:
            if sock.connect_ex((LOOPBACK, port)) == 0:
                return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the emulator exited with {proc.returncode} before listening")
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing listens on port {port}")
        time.sleep(0.05)


def api(base: str, method: str, path: str, **kwargs: Any) -> requests.Response:
    return requests.request(method, f"{base}/v2{path}", headers=AUTH, timeout=TIMEOUT, **kwargs)


def valid_traffic(base: str) -> int:
    """Requests the overlay allows, answered as it documents; returns how many were sent."""
    answers = [
        api(base, "GET", "/plans", params={"type": "all", "per_page": 500}),
        api(base, "GET", "/kubernetes/versions"),
        api(base, "POST", "/kubernetes/clusters", json=CLUSTER),
        api(base, "GET", "/kubernetes/clusters"),
    ]
    assert [a.status_code for a in answers] == [200, 200, 201, 200], [a.text for a in answers]
    return len(answers)


def contract(base: str) -> dict[str, Any]:
    answer = requests.get(f"{base}/lab/contract", timeout=TIMEOUT)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"] == "application/json"
    report = answer.json()
    assert isinstance(report, dict)
    return report


def violation_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if VIOLATION_PREFIX in line]


# ---- the emulator on its own ------------------------------------------------------------------------


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path, Path]]:
    """``python -m lab.vultr.server --contract`` (the default spec); yields (process, base URL, state dir, stderr)."""
    contract_or_skip()
    port = free_port()
    state = tmp_path / "state"
    stderr = tmp_path / "vultr.stderr"
    cmd = lab_command("lab.vultr.server", "--port", str(port), "--delay-scale", "0")
    cmd += ["--state-dir", str(state), "--contract"]
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=lab_environment()
        )
    try:
        wait_listening(port, proc)
        yield proc, f"http://{LOOPBACK}:{port}", state, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)


def test_contract_switch_reports_violations_on_stderr_in_the_report_and_the_endpoint(
    emulator: tuple[subprocess.Popen[bytes], str, Path, Path],
) -> None:
    proc, base, state, stderr = emulator
    report_file = state / CONTRACT_REPORT

    # Written before the emulator listens: the contract is checked, nothing seen yet.
    assert json.loads(report_file.read_text())["checked"] == 0
    first = contract(base)
    assert (first["enabled"], first["spec"], first["checked"], first["violations"]) == (True, str(OVERLAY), 0, [])

    # The clean case: documented requests and answers, every one checked, no violation.
    sent = valid_traffic(base)
    clean = contract(base)
    assert (clean["checked"], clean["violations"]) == (sent, [])
    assert violation_lines(stderr.read_text()) == []

    # A request the overlay rejects (the emulator still answers it, as the API ignores unknown parameters).
    assert api(base, "GET", "/kubernetes/clusters", params={"bogus": "1"}).status_code == 200
    # An answer the overlay rejects: the test-only fault adds an undocumented field.
    fault = {"fault": "undocumented_field", "method": "GET", "path": "/plans$", "count": 1}
    assert requests.post(f"{base}/lab/faults", json=fault, timeout=TIMEOUT).status_code == 201
    plans = api(base, "GET", "/plans")
    assert plans.json()["lab_undocumented_field"] is True

    report = contract(base)
    assert report["checked"] == sent + 2  # the /lab/* control requests are not API exchanges
    found = [(v["method"], v["path"], v["status"], v["fault"]) for v in report["violations"]]
    assert found == [
        ("GET", "/v2/kubernetes/clusters", 200, None),
        ("GET", "/v2/plans", 200, "undocumented_field"),
    ], report["violations"]
    assert report["violations"][0]["reason"] == f"request: {BOGUS_QUERY}"
    assert "undocumented field(s) lab_undocumented_field" in report["violations"][1]["reason"]

    # Each one is a line on stderr, printed before the answer left (so it is there now).
    assert violation_lines(stderr.read_text()) == [
        f"{VIOLATION_PREFIX} GET /v2/kubernetes/clusters: request: {BOGUS_QUERY}",
        f"{VIOLATION_PREFIX} GET /v2/plans: {report['violations'][1]['reason']}",
    ]
    # ... and in the report file, kept current while the emulator runs.
    assert json.loads(report_file.read_text())["violations"] == report["violations"]

    # A clean shutdown writes the final report.
    assert api(base, "GET", "/kubernetes/versions").status_code == 200
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=TIMEOUT) == 0
    final = json.loads(report_file.read_text())
    assert final["checked"] == sent + 3
    assert final["violations"] == report["violations"]


def test_without_the_switch_nothing_is_checked(tmp_path: Path) -> None:
    port = free_port()
    cmd = lab_command("lab.vultr.server", "--port", str(port), "--delay-scale", "0")
    proc = subprocess.Popen(
        [*cmd, "--state-dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=lab_environment()
    )
    try:
        wait_listening(port, proc)
        base = f"http://{LOOPBACK}:{port}"
        assert api(base, "GET", "/kubernetes/clusters", params={"bogus": "1"}).status_code == 200
        assert contract(base) == {"enabled": False, "spec": None, "checked": 0, "violations": [], "exempted": 0}
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0
    assert VIOLATION_PREFIX.encode() not in err
    assert not (tmp_path / CONTRACT_REPORT).exists()


def test_contract_switch_refuses_a_missing_spec(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    cmd = lab_command("lab.vultr.server", "--port", str(free_port()), "--contract", str(missing))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, env=lab_environment())
    assert done.returncode == 2
    assert f"--contract: the Vultr overlay spec {missing} does not exist" in done.stderr


# ---- how labctl starts and reports it -----------------------------------------------------------------


def test_registry_passes_contract_only_when_the_overlay_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "overlay.json"
    spec.write_text("{}")
    assert vultr_contract_args(spec) == ["--contract", str(spec)]
    assert capsys.readouterr().err == ""
    missing = tmp_path / "absent" / "overlay.json"
    assert vultr_contract_args(missing) == []
    assert vultr_contract_args(missing) == []
    said = capsys.readouterr().err
    assert said.count("no contract checking") == 1, said  # once, however often labctl starts it
    assert str(missing) in said
    vultr = next(e for e in EMULATORS if e.name == "vultr")
    assert vultr.contract_report is not None
    assert vultr.contract_report(tmp_path) == tmp_path / VULTR_STATE / CONTRACT_REPORT
    # endpoints.yml publishes contract_url only for an emulator that wrote its report (it checks).
    assert "contract_url" not in _vultr_endpoint(LOOPBACK, 1234, tmp_path)
    (tmp_path / VULTR_STATE).mkdir()
    (tmp_path / VULTR_STATE / CONTRACT_REPORT).write_text("{}")
    assert _vultr_endpoint(LOOPBACK, 1234, tmp_path)["contract_url"] == f"http://{LOOPBACK}:1234/lab/contract"


def labctl(state_dir: Path, command: str) -> subprocess.CompletedProcess[str]:
    cmd = lab_command("lab.labctl", command, "--state-dir", str(state_dir), "--delay-scale", "0")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False, env=lab_environment())


@pytest.fixture
def lab_state(tmp_path: Path) -> Iterator[Path]:
    contract_or_skip()  # labctl passes --contract only with the overlay spec
    state = tmp_path / "lab"
    yield state
    labctl(state, "down")  # whatever a failing test left running


def vultr_base(state: Path) -> tuple[str, str]:
    """The vultr emulator's base URL and contract URL, as endpoints.yml publishes them."""
    endpoints = yaml.safe_load((state / "endpoints.yml").read_text())["emulators"]["vultr"]
    assert "contract_url" in endpoints, endpoints
    return endpoints["api_endpoint"], endpoints["contract_url"]


def status_line(state: Path) -> str:
    status = labctl(state, "status")
    assert status.returncode == 0, status.stderr
    return next(line for line in status.stdout.splitlines() if line.startswith("vultr "))


def test_labctl_clean_lab_reports_zero_violations(lab_state: Path) -> None:
    up = labctl(lab_state, "up")
    assert up.returncode == 0, up.stderr
    assert "no contract checking" not in up.stderr
    base, contract_url = vultr_base(lab_state)
    sent = valid_traffic(base)
    report = requests.get(contract_url, timeout=TIMEOUT).json()
    assert (report["checked"], report["violations"]) == (sent, [])  # the lab's own emulator saw only ours
    assert status_line(lab_state).endswith(f"contract: {sent} checked, 0 violations")

    down = labctl(lab_state, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert f"vultr: contract: {sent} exchanges checked, 0 violations" in down.stdout
    assert VIOLATION_PREFIX not in down.stderr


def verify_contract(playbook: Callable[..., Any], state: Path, tmp: Path) -> dict[str, Any]:
    """Run the contract play of molecule's lab verify against this lab; return its assert's result."""
    plays = yaml.safe_load(LAB_VERIFY.read_text())
    play = next(p for p in plays if p["name"] == VERIFY_PLAY)
    path = tmp / "verify-contract.yml"
    path.write_text(yaml.safe_dump([play], sort_keys=False))
    run = playbook(path, inventory=LAB_INVENTORY, env={"LAB_STATE_DIR": str(state), "TMPDIR": str(tmp)})
    return run.task(play["tasks"][-1]["name"])


def test_labctl_down_fails_on_a_recorded_violation(
    lab_state: Path, playbook: Callable[..., Any], ansible_tmp: Path
) -> None:
    up = labctl(lab_state, "up")
    assert up.returncode == 0, up.stderr
    base, contract_url = vultr_base(lab_state)
    sent = valid_traffic(base)
    # molecule's lab verify reads /lab/contract through ansible.builtin.uri: clean so far.
    verified = verify_contract(playbook, lab_state, ansible_tmp)
    assert verified.get("failed") is not True, verified
    assert verified["msg"] == f"{sent} exchanges checked, 0 violations"

    assert api(base, "GET", "/kubernetes/clusters", params={"bogus": "1"}).status_code == 200
    report = requests.get(contract_url, timeout=TIMEOUT).json()
    assert [v["reason"] for v in report["violations"]] == [f"request: {BOGUS_QUERY}"]
    assert status_line(lab_state).endswith(f"contract: {sent + 1} checked, 1 violation")
    verified = verify_contract(playbook, lab_state, ansible_tmp)
    assert verified.get("failed") is True, verified
    assert verified["msg"].startswith("1 contract violation(s): "), verified["msg"]
    assert BOGUS_QUERY in verified["msg"]

    down = labctl(lab_state, "down")
    assert down.returncode == 1, down.stdout + down.stderr
    assert "vultr" in down.stdout.splitlines()[0]  # stopped anyway, like every other emulator
    assert f"vultr: contract: {sent + 1} exchanges checked, 1 violation" in down.stdout
    line = f"{VIOLATION_PREFIX} GET /v2/kubernetes/clusters: request: {BOGUS_QUERY}"
    assert line in down.stderr
    assert "1 contract violation(s) recorded" in down.stderr
    # The emulator's own stderr line is in labctl's log of it.
    assert line in (lab_state / "logs" / "vultr.log").read_text()
    # down cleaned up as always; a second down has nothing left to report.
    assert not (lab_state / "endpoints.yml").exists()
    again = labctl(lab_state, "down")
    assert again.returncode == 0, again.stdout + again.stderr
