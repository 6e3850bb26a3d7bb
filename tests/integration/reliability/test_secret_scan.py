"""Secret scan (issue 20, part 4): site.yml up and down at -vvv on the lab, every byte it left scanned for secrets.

Recognisable secrets go in (the Vultr API key, the Modelplane control plane's token) and come out of the platform
(each VKE cluster's kubeconfig token, which the run fetches, writes to a 0600 file and hands to Modelplane in a
Secret). Then everything the runs printed or wrote is scanned for each of them and their base64 forms: stdout and
stderr at -vvv (module invocations, results, diffs, warnings), the timeline callback's JSON and HTML, every file
under the run's TMPDIR and the lab state directory. The only files allowed to hold a secret are the ones made for
it: the cluster kubeconfigs, which must be mode 0600, and the endpoints file the test itself wrote as the input.
The figure is ``secret leaks: 0``.
"""

from __future__ import annotations

import base64
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.reliability.vke_lab import INVENTORY, SITE, VkeLabContext

from support.figures import record
from support.playbook import SHORT_TMP_ROOT, PlaybookRun, run_playbook

VULTR_KEY = "VULTRKEY-s3cr3t-5f0c2b7e91d4a6"
MODELPLANE_TOKEN = "MPTOKEN-s3cr3t-0a9e8d7c6b5f4e"
VERBOSE = 3  # -vvv: what a user pastes into a bug report


def forms(secret: str) -> set[str]:
    """The secret and the encodings a leak would take (base64 in a kubeconfig or a Secret's data)."""
    raw = secret.encode()
    return {secret, base64.b64encode(raw).decode(), base64.b64encode(raw).decode().rstrip("=")}


def leaks(secrets: dict[str, str], where: str, text: str) -> list[str]:
    return [f"{name} in {where}" for name, secret in secrets.items() for form in forms(secret) if form in text]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = Path(str(tmp_path_factory.mktemp("scan")))
    tmp = Path(tempfile.mkdtemp(prefix="mp-scan-", dir=SHORT_TMP_ROOT))  # short: ansible-core's socket lives here
    with VkeLabContext(root, tmp, api_key=VULTR_KEY, token=MODELPLANE_TOKEN) as lab:
        state = lab.state
        done: dict[str, Any] = {"state": state, "tmp": tmp, "timelines": []}
        for direction in ("up", "down"):
            timeline = root / f"timeline-{direction}"
            done["timelines"].append(timeline)
            env = lab.env(
                ANSIBLE_CALLBACKS_ENABLED="metalplane.inference.timeline", METALPLANE_TIMELINE_DIR=str(timeline)
            )
            extra = {"cluster_state": "absent"} if direction == "down" else None
            if direction == "down":  # the VKE kubeconfig tokens, read before the teardown removes the files
                kubeconfigs = sorted((state / "kubeconfigs").glob("*"))
                done["vke_tokens"] = {
                    f"VKE token of {path.name}": user["user"]["token"]
                    for path in kubeconfigs
                    for user in yaml.safe_load(path.read_text())["users"]
                    if user.get("user", {}).get("token")
                }
                done["modes"] = {path.name: stat.S_IMODE(path.stat().st_mode) for path in kubeconfigs}
            done[direction] = run_playbook(
                SITE,
                inventory=INVENTORY,
                extra_vars=extra,
                env=env,
                limit="vke_clusters",
                verbosity=VERBOSE,
                timeout=900,
            )
    yield done  # outside the lab: every run is over, and the scan reads only what the runs left
    shutil.rmtree(tmp, ignore_errors=True)


def ok(run: PlaybookRun) -> None:
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-3000:]


def test_up_and_down_at_vvv_leak_no_secret(runs: dict[str, Any]) -> None:
    """The runs are what costs: every check of them is in this one test."""
    ok(runs["up"])
    ok(runs["down"])
    # The kubeconfigs the secrets live in are private.
    assert runs["modes"], "no kubeconfig was written"
    assert set(runs["modes"].values()) == {0o600}, runs["modes"]
    secrets = {"Vultr API key": VULTR_KEY, "Modelplane token": MODELPLANE_TOKEN, **runs["vke_tokens"]}
    assert len(runs["vke_tokens"]) >= 1  # the scan knows what the platform handed out
    found: list[str] = []
    for direction in ("up", "down"):
        run: PlaybookRun = runs[direction]
        found += leaks(secrets, f"{direction} stdout", run.stdout)
        found += leaks(secrets, f"{direction} stderr", run.stderr)
    allowed = {runs["state"] / "endpoints.yml"}  # the test's own input
    scanned = 0
    for root in (*runs["timelines"], runs["state"], runs["tmp"]):
        for path in sorted(p for p in Path(root).rglob("*") if p.is_file() and p not in allowed):
            scanned += 1
            found += leaks(secrets, str(path), path.read_bytes().decode("utf-8", "replace"))
    assert scanned >= 2  # the timelines at least
    record(
        "secrets",
        {"secret leaks": len(found), "secrets": len(secrets), "files scanned": scanned, "runs": 2},
        "site.yml up and down of the lab's VKE cluster at -vvv with the timeline callback: each secret (and its "
        "base64) searched in stdout, stderr, the timeline reports and every file under TMPDIR and the lab state "
        "directory but the 0600 kubeconfigs made to hold them",
    )
    assert found == [], f"secret leaks: {len(found)}: " + "; ".join(found)


def test_the_scan_finds_a_planted_secret_in_each_form() -> None:
    secrets = {"Vultr API key": VULTR_KEY}
    encoded = base64.b64encode(VULTR_KEY.encode()).decode()
    assert leaks(secrets, "stdout", f"... {VULTR_KEY} ...") == ["Vultr API key in stdout"]
    assert leaks(secrets, "a file", f"data: {encoded}\n") == ["Vultr API key in a file"]
    assert leaks(secrets, "stdout", "api_key: VALUE_SPECIFIED_IN_NO_LOG_PARAMETER") == []
