"""The VM lane's cleanup decisions: which directories a killed lane left, which processes are the lane's.

Why: a lane killed before its teardown (SIGKILL, a power cut) leaves a QEMU running in a session of its own and
a disk image under /tmp; the next lane session removes them (``metal_vm.lane.sweep_stale``). These decisions
must never pick another engineer's running lane, a directory that is not a lane's, or a process that merely
reuses a dead one's pid. Pure: no VM, no signal sent.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from metal_vm import lane
from metal_vm.lane import OWNER_FILE, REQUIRED_ENV, WORKDIR_PREFIX, leftovers, make_workdir, stale_workdirs, started_by

ALIVE, DEAD = 1000, 2000


@pytest.mark.parametrize(
    ("name", "owner", "stale"),
    [
        (f"{WORKDIR_PREFIX}a", f"{DEAD}\n", True),
        (f"{WORKDIR_PREFIX}b", f"{ALIVE}\n", False),  # a lane that still runs (another session's)
        (f"{WORKDIR_PREFIX}c", None, False),  # no owner file: not a lane directory
        (f"{WORKDIR_PREFIX}d", "garbage", False),
        ("other-e", f"{DEAD}\n", False),  # not the lane's prefix
    ],
    ids=["owner-dead", "owner-alive", "no-owner", "bad-owner", "other-prefix"],
)
def test_stale_workdirs(tmp_path: Path, name: str, owner: str | None, stale: bool) -> None:
    directory = tmp_path / name
    directory.mkdir()
    if owner is not None:
        (directory / OWNER_FILE).write_text(owner)
    assert stale_workdirs(tmp_path, lambda pid: pid == ALIVE) == ([directory] if stale else [])


def test_make_workdir_names_this_process_as_owner(tmp_path: Path) -> None:
    workdir = make_workdir(tmp_path)
    assert workdir.name.startswith(WORKDIR_PREFIX)
    assert stale_workdirs(tmp_path, lambda pid: False) == [workdir]
    assert stale_workdirs(tmp_path, lambda pid: True) == []


@pytest.mark.parametrize(
    ("argv", "ours"),
    [
        (b"qemu-system-x86_64\0-pidfile\0/tmp/mvm-x1/vm/qemu.pid\0", True),
        (b"python3\0-c\0...\0metalplane-iso-server\0/tmp/mvm-x1/isos/r730-vm.iso\0", True),
        (b"qemu-system-x86_64\0-pidfile\0/tmp/mvm-x12/vm/qemu.pid\0", False),  # another lane's, same prefix
        (b"sshd\0", False),  # a recycled pid
        (b"", False),  # gone (or a zombie)
    ],
    ids=["qemu", "iso-server", "other-lane", "recycled", "gone"],
)
def test_started_by_reads_the_command_line(argv: bytes, ours: bool) -> None:
    assert started_by(Path("/tmp/mvm-x1"), 4242, lambda pid: argv) is ours


def test_leftovers_name_the_directory_and_its_files(tmp_path: Path) -> None:
    directory = tmp_path / f"{WORKDIR_PREFIX}left"
    (directory / "vm").mkdir(parents=True)
    (directory / "vm" / "disk.qcow2").touch()
    assert leftovers(directory, []) == [f"{directory} (2 files)"]
    assert leftovers(tmp_path / "gone", []) == []


@pytest.mark.parametrize(
    ("required", "outcome"),
    [("1", pytest.fail.Exception), ("", pytest.skip.Exception), ("0", pytest.skip.Exception)],
    ids=["make-target-fails", "plain-pytest-skips", "not-required-skips"],
)
def test_a_missing_prerequisite_never_passes(
    monkeypatch: pytest.MonkeyPatch, required: str, outcome: type[BaseException]
) -> None:
    """Without QEMU the lane skips under plain pytest and fails under the make targets, naming the command."""
    monkeypatch.setenv(REQUIRED_ENV, required)
    monkeypatch.setattr(lane.shutil, "which", lambda name: None)
    # Caught as BaseException and compared: a Skipped escaping pytest.raises would report a skip, not a failure.
    try:
        lane.require_qemu()
    except BaseException as exc:  # pytest's outcomes are BaseExceptions
        raised: BaseException | None = exc
    else:
        raised = None
    assert type(raised) is outcome, raised  # pylint: disable=unidiomatic-typecheck  # exactly this class, no subclass
    assert "sudo scripts/install-vm-lane.sh" in str(raised)
