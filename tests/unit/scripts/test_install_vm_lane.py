"""``scripts/install-vm-lane.sh``: the VM lane's QEMU, qemu-utils and OVMF, installed as root or named.

Why: ``make test-metal-vm`` must never pass by skipping on a machine without QEMU. The script is the make
target's first step: with everything present it says so; with something missing and no root (or ``--check``)
it fails naming the packages and the command to run. Each case is a root directory (``VM_LANE_ROOT``) holding
some of the files the packages install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPT = REPO_ROOT / "scripts" / "install-vm-lane.sh"
FILES = {
    "qemu-system-x86": "usr/bin/qemu-system-x86_64",
    "qemu-utils": "usr/bin/qemu-img",
    "ovmf": "usr/share/OVMF/OVMF_CODE_4M.fd",
}


@pytest.mark.parametrize(
    ("present", "rc", "missing"),
    [
        (set(FILES), 0, []),
        ({"qemu-utils", "ovmf"}, 1, ["qemu-system-x86"]),
        (set(), 1, ["qemu-system-x86", "qemu-utils", "ovmf"]),
    ],
    ids=["all", "no-qemu", "nothing"],
)
def test_check_names_what_is_missing_and_the_command(
    tmp_path: Path, present: set[str], rc: int, missing: list[str]
) -> None:
    for package in present:
        path = tmp_path / FILES[package]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    proc = subprocess.run(
        [str(SCRIPT), "--check"],
        env={**os.environ, "VM_LANE_ROOT": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == rc, proc.stderr
    if missing:
        assert f"missing {' '.join(missing)}" in proc.stderr
        assert "sudo scripts/install-vm-lane.sh" in proc.stderr
        assert f"apt-get install --no-install-recommends {' '.join(missing)}" in proc.stderr
    else:
        assert "are installed" in proc.stdout


def _as_another_user() -> list[str]:
    """Run as ``nobody`` when the tests run as root (this machine), as ourselves otherwise (CI)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux): cannot drop to another user")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_without_root_it_fails_naming_the_command_and_never_waits(tmp_path: Path) -> None:
    # Without --check: the make target's own call. Stdin closed and a deadline: a prompt (sudo's password,
    # apt's confirmation) would hang instead of failing.
    proc = subprocess.run(
        [*_as_another_user(), "bash", str(SCRIPT)],
        env={**os.environ, "VM_LANE_ROOT": str(tmp_path / "empty")},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "missing qemu-system-x86 qemu-utils ovmf" in proc.stderr
    assert "sudo scripts/install-vm-lane.sh" in proc.stderr
