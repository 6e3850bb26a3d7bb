"""Secret scan of the bare-metal path (issue 20, part 4), the metal twin of test_secret_scan.py.

site.yml takes the lab's R730 up and down at -vvv with the timeline callback. Recognisable secrets go in: the BMC
password, the root password hash (a real crypt(3) hash with a salt the scan knows), the Modelplane control plane's
token and the operator's SSH private key (its file is the input). Others come out of the run, read back where they
were made: the server's SSH host private key from its disk after the install, the credential of kubeadm's admin
kubeconfig (a client key; the lab's API takes a token in its place) and the token of Modelplane's service account
from the 0600 kubeconfigs on the controller.

Every secret (and its base64) is searched in stdout and stderr of both runs, the timeline's JSON and HTML, every
file under the run's TMPDIR and the lab state directory, every file written under ``.build/`` and Ansible's
``~/.ansible/tmp`` while the runs went on, and every file of the installer ISO as the server fetched it (the ISO's
own tree and the preseed archive appended to its initrd, decompressed). Each place may hold only the
secrets it was made for:

- the ISO: the root password hash and the SSH host key, nothing else (not the BMC password, not a token, not the
  operator's private key);
- the server's own disk (the lab's simulated host): what an installed node holds (its host key, its shadow file,
  its cluster's keys and tokens), never the BMC password, the control plane's token or the operator's key;
- the 0600 kubeconfigs (removed by the teardown, so read after the up): their own cluster's key and token;
- the operator's key file and ``endpoints.yml``: the inputs.

The figure is ``secret leaks: 0``. Slow (a whole up and down at -vvv, about two minutes on two cores):
``make reliability`` runs it.
"""

from __future__ import annotations

import base64
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.metal.metal_site import CLUSTER, REPO, MetalLab, metal_lab
from integration.reliability.test_secret_scan import forms, leaks

from lab.metal.iso_reader import iso_files
from support.figures import record
from support.playbook import SHORT_TMP_ROOT, PlaybookRun

FULL = os.environ.get("METALPLANE_RELIABILITY_FULL") == "1"
BMC = "r730-1"
BMC_PASSWORD = "BMCPASS-s3cr3t-7d2e9a41c6b80f"
MODELPLANE_TOKEN = "MPTOKEN-s3cr3t-metal-3b8c1d5e"
# `openssl passwd -6 -salt mpscans3cr3t lab-root`: a hash the installer accepts, with a salt the scan recognises.
ROOT_PASSWORD_HASH = (
    "$6$mpscans3cr3t$l/2UoiQVmiMU/iGFo2jLwQhXTlJjhJSHIpvF8zavIFl.jnYhRJxjPjdk7BVfJVIXXuNnsZU15gfa5TFSbQ9LB1"
)
VERBOSE = 3  # -vvv: what a user pastes into a bug report
HOST_KEY = "the server's SSH host key"
ADMIN_KEY = "the kubeadm admin credential"
SA_TOKEN = "Modelplane's service account token"
OPERATOR_KEY = "the operator's SSH private key"
# What each place was made to hold; anywhere else every secret is a leak.
ISO_HOLDS = {"root password hash", HOST_KEY}
SERVER_DISK_HOLDS = {"root password hash", HOST_KEY, ADMIN_KEY, SA_TOKEN}

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not FULL, reason="make reliability (about 2 min)")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = Path(str(tmp_path_factory.mktemp("metal-scan")))
    tmp = Path(tempfile.mkdtemp(prefix="mp-mscan-", dir=SHORT_TMP_ROOT))  # the runs' TMPDIR, the lab state under it
    with metal_lab(tmp, bmc_password=BMC_PASSWORD, modelplane_token=MODELPLANE_TOKEN) as lab:
        done: dict[str, Any] = {"lab": lab, "tmp": tmp, "timelines": [root / "timeline-up", root / "timeline-down"]}
        done["started"] = time.time()
        done["up"] = lab.site(
            timeline=done["timelines"][0], verbosity=VERBOSE, baremetal_host_root_password_hash=ROOT_PASSWORD_HASH
        )
        done.update(made_by_the_run(lab, root))
        done["secrets"] = secrets_of(lab, done["made"])
        # While the node runs: its disk and the controller's kubeconfigs, which the teardown wipes and removes.
        done["after up"] = scan_files([tmp], done["secrets"], Places(lab, done["kubeconfigs"]))
        done["down"] = lab.site(
            timeline=done["timelines"][1],
            verbosity=VERBOSE,
            cluster_state="absent",
            baremetal_host_root_password_hash=ROOT_PASSWORD_HASH,
        )
        done["isos left"] = lab.isos()
        deadline = time.monotonic() + 30  # each run's lock renewer deletes its Lease and exits within seconds
        while lab.run_locks() and time.monotonic() < deadline:
            time.sleep(0.2)
    yield done  # outside the lab: every run is over, and the scan reads only what the runs left
    shutil.rmtree(tmp, ignore_errors=True)


def made_by_the_run(lab: MetalLab, root: Path) -> dict[str, Any]:
    """The secrets the up run made, read where they live, and a copy of the ISO the server booted (the teardown
    wipes the disk and removes the kubeconfigs)."""
    host = lab.fleet.host(BMC)
    host_key = host.disk.read("/etc/ssh/ssh_host_ed25519_key")
    kubeconfigs = lab.state / "kubeconfigs"
    admin = kubeconfigs / f"{CLUSTER}.kubeconfig"
    modelplane = kubeconfigs / f"{CLUSTER}-modelplane.kubeconfig"
    served = root / "served.iso"
    shutil.copyfile(host.directory / "virtual-cd.iso", served)
    return {
        "made": {
            HOST_KEY: host_key.decode() if host_key else "",
            ADMIN_KEY: credential_of(yaml.safe_load(admin.read_text())),
            SA_TOKEN: credential_of(yaml.safe_load(modelplane.read_text())),
        },
        "modes": {path.name: stat.S_IMODE(path.stat().st_mode) for path in kubeconfigs.iterdir()},
        "kubeconfigs": {admin: {ADMIN_KEY}, modelplane: {SA_TOKEN}},
        "served iso": served,
    }


class Places:
    """Which secrets a file may hold, by where it is (anything not named here: none)."""

    def __init__(self, lab: MetalLab, kubeconfigs: dict[Path, set[str]]) -> None:
        self.endpoints = lab.state / "endpoints.yml"  # the test's own input
        self.operator_key = operator_key(lab)
        self.server = lab.state / "metal" / "hosts"  # each simulated server's own disk, CD and console
        self.kubeconfigs = kubeconfigs

    def may_hold(self, path: Path) -> set[str]:
        if path == self.endpoints:
            return {"BMC password"}
        if path == self.operator_key:
            return {OPERATOR_KEY}
        if path in self.kubeconfigs:
            return self.kubeconfigs[path]
        if path.is_relative_to(self.server):
            return SERVER_DISK_HOLDS
        return set()

    def skip(self, path: Path) -> bool:
        """A running server's live root (its disk is read through the overlay's upper layers) and overlayfs's
        private work directories."""
        inside = path.relative_to(self.server).parts if path.is_relative_to(self.server) else ()
        return "mnt" in inside[1:2] or "work" in inside


def scan_written_since(roots: list[Path], since: float, secrets: dict[str, str]) -> tuple[list[str], int]:
    """The leaks in every file under ``roots`` written since ``since`` (symlinks not followed: ``.build/collections``
    is this checkout). Nothing there was made to hold a secret."""
    found: list[str] = []
    scanned = 0
    for root in roots:
        for directory, _dirs, names in os.walk(root):
            for name in names:
                path = Path(directory, name)
                try:
                    if path.is_symlink() or path.stat().st_mtime < since:
                        continue
                    text = path.read_bytes().decode("utf-8", "replace")
                except (FileNotFoundError, PermissionError):
                    continue
                scanned += 1
                found += leaks(secrets, str(path), text)
    return found, scanned


def scan_files(roots: list[Path], secrets: dict[str, str], places: Places) -> tuple[list[str], int]:
    """The leaks in every file under ``roots`` (each may hold only what ``places`` allows), and how many files."""
    found: list[str] = []
    scanned = 0
    for root in roots:
        for path in sorted(p for p in Path(root).rglob("*") if not places.skip(p) and p.is_file()):
            try:
                text = path.read_bytes().decode("utf-8", "replace")
            except FileNotFoundError:  # a process's temporary file, removed as it exited (nothing left to leak)
                continue
            scanned += 1
            allowed = places.may_hold(path)
            found += leaks({n: s for n, s in secrets.items() if n not in allowed}, str(path), text)
    return found, scanned


def credential_of(kubeconfig: dict[str, Any]) -> str:
    """The user's secret: kubeadm's admin.conf carries a client key (the lab's, the API's admin token), a
    service account's kubeconfig a token."""
    user = kubeconfig["users"][0]["user"]
    if user.get("client-key-data"):
        return base64.b64decode(user["client-key-data"]).decode()
    return str(user["token"])


def secrets_of(lab: MetalLab, made: dict[str, str]) -> dict[str, str]:
    return {
        "BMC password": BMC_PASSWORD,
        "Modelplane token": MODELPLANE_TOKEN,
        "root password hash": ROOT_PASSWORD_HASH,
        OPERATOR_KEY: operator_key(lab).read_text(),
        **made,
    }


def operator_key(lab: MetalLab) -> Path:
    return Path(lab.fleet.describe()["ssh_key"]["private_key_file"])


def ok(run: PlaybookRun) -> None:
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-3000:]


def test_metal_up_and_down_at_vvv_leak_no_secret(runs: dict[str, Any]) -> None:
    ok(runs["up"])
    ok(runs["down"])
    secrets = runs["secrets"]
    assert all(secrets.values()), [name for name, value in secrets.items() if not value]
    found_up, scanned_up = runs["after up"]
    found = list(found_up)
    for direction in ("up", "down"):
        run: PlaybookRun = runs[direction]
        found += leaks(secrets, f"{direction} stdout", run.stdout)
        found += leaks(secrets, f"{direction} stderr", run.stderr)
    found_down, scanned = scan_files([*runs["timelines"], runs["tmp"]], secrets, Places(runs["lab"], {}))
    found += found_down
    # What Ansible writes outside TMPDIR (its module payloads, with their arguments, under ~/.ansible/tmp) and
    # anything the runs left under .build/.
    found_elsewhere, scanned_elsewhere = scan_written_since(
        [REPO / ".build", Path.home() / ".ansible" / "tmp"], runs["started"], secrets
    )
    found += found_elsewhere
    iso = iso_files(runs["served iso"])
    in_iso: set[str] = set()
    for name, content in iso.items():
        text = content.decode("utf-8", "replace")
        found += leaks({n: s for n, s in secrets.items() if n not in ISO_HOLDS}, f"the ISO's {name}", text)
        in_iso |= {n for n in ISO_HOLDS if any(form in text for form in forms(secrets[n]))}
    assert in_iso == ISO_HOLDS, f"the scan did not read the ISO's configuration: found only {in_iso}"
    assert scanned_up >= 10  # the lab state, the kubeconfigs, the server's disk at least
    assert scanned >= 10  # the timelines and what the runs left
    record(
        "secrets_metal",
        {
            "secret leaks": len(found),
            "secrets": len(secrets),
            "files scanned after the up": scanned_up,
            "files scanned after the down": scanned,
            "files written under .build and ~/.ansible/tmp during the runs": scanned_elsewhere,
            "files in the ISO scanned": len(iso),
            "runs": 2,
        },
        "site.yml up and down of the lab's R730 at -vvv with the timeline callback: the BMC password, the root "
        "password hash, the control plane's token, the operator's SSH key, the server's SSH host key, the kubeadm "
        "admin credential and Modelplane's service account token (and their base64) searched in stdout, stderr, "
        "the timeline reports, every file under TMPDIR and the lab state directory, every file written under .build "
        "and ~/.ansible/tmp during the runs and every file of the ISO the server booted; each place may hold only "
        "what it was made for",
    )
    assert found == [], f"secret leaks: {len(found)}: " + "; ".join(found)


def test_the_metal_kubeconfigs_are_private_and_gone_after_the_teardown(runs: dict[str, Any]) -> None:
    assert runs["modes"], "no kubeconfig was written"
    assert set(runs["modes"].values()) == {0o600}, runs["modes"]
    assert not [path for path in runs["kubeconfigs"] if path.exists()], "the teardown left a kubeconfig"
    assert runs["isos left"] == []
