"""The host sandbox: the kernel probe fails fast with the fix named, and a session cannot reach the machine."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.metal import sandbox
from lab.metal.sandbox import Disk, Sandbox, SandboxLayout, SandboxUnavailable, Tools
from lab.metal.shims import install_shims

# (case, a stand-in unshare, what the error names)
FAKE_UNSHARE = [
    (
        "user namespaces switched off",
        "echo 'unshare: unshare failed: Operation not permitted' >&2; exit 1",
        "kernel.unprivileged_userns_clone",
    ),
    ("no overlayfs in a user namespace", "echo 'overlay: [Errno 19] No such device'; exit 1", "modprobe overlay"),
    ("a hanging kernel", "sleep 30", "did not finish in 1s"),
]


@pytest.mark.parametrize(("script", "names"), [c[1:] for c in FAKE_UNSHARE], ids=[c[0] for c in FAKE_UNSHARE])
def test_the_probe_fails_fast_naming_the_fix(tmp_path: Path, script: str, names: str) -> None:
    fake = tmp_path / "unshare"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    with pytest.raises(SandboxUnavailable, match=names.replace(".", r"\.")):
        sandbox.probe(Tools(str(fake), "/usr/bin/nsenter", "/usr/bin/python3"), timeout=1.0)


def test_missing_util_linux_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailable, match="util-linux"):
        sandbox.find_tools()


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Sandbox, Disk]]:
    try:
        tools = sandbox.probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"the host sandboxes cannot run here: {exc}")
    disk = Disk(tmp_path / "disk")
    disk.wipe()
    layout = SandboxLayout(
        skeleton=sandbox.make_skeleton(tmp_path / "skeleton"),
        firmware=tmp_path / "firmware",
        shims_usr=install_shims(tmp_path / "shims"),
        disk=disk,
        control_dir=tmp_path / "control",
        mountpoint=tmp_path / "mnt",
    )
    layout.firmware.mkdir()
    layout.control_dir.mkdir()
    box = Sandbox(layout, tools, hostname="node9", boot_id="11111111-2222-3333-4444-555555555555")
    box.start()
    yield box, disk
    box.stop()


def inside(box: Sandbox, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        box.command(["/bin/sh", "-c", script]), capture_output=True, text=True, timeout=30, check=False
    )


# (case, a command inside the host, what it must print)
ISOLATION = [
    ("root of its own namespaces", "id -u; hostname", "0\nnode9\n"),
    ("PID 1 is the sandbox's init", "cat /proc/1/cmdline | tr '\\0' ' ' | grep -c sandbox_init", "1\n"),
    ("this boot's id", "cat /proc/sys/kernel/random/boot_id", "11111111-2222-3333-4444-555555555555\n"),
    ("no block device of the machine", "ls /dev | grep -cE '^(sd|nvme|vd|xvd|loop|dm-)' || true", "0\n"),
    ("kernel settings are read-only", "echo 1 > /proc/sys/vm/drop_caches 2>/dev/null; echo $?", "2\n"),
    (
        "the machine's files are not there",
        "test -e /work -o -e /home/$(id -un) -o -e /old_root && echo seen || echo gone",
        "gone\n",
    ),
    (
        "hardware commands are shims",
        "readlink /usr/sbin/reboot /sbin/wipefs",
        "../lib/metal-lab/shim\n../lib/metal-lab/shim\n",
    ),
    ("sudo runs the command", "sudo -H -S -n -u root /bin/sh -c 'echo become'", "become\n"),
]


@pytest.mark.parametrize(("script", "expected"), [c[1:] for c in ISOLATION], ids=[c[0] for c in ISOLATION])
def test_a_session_sees_only_the_host(running: tuple[Sandbox, Disk], script: str, expected: str) -> None:
    box, _disk = running
    result = inside(box, script)
    assert result.stdout == expected, result.stderr


def test_writes_land_on_the_host_disk_and_survive_a_reboot(running: tuple[Sandbox, Disk]) -> None:
    box, disk = running
    assert (
        inside(box, "echo kept > /root/note && echo cfg > /etc/lab.conf && echo bin > /usr/local/bin/tool").returncode
        == 0
    )
    assert disk.read("/root/note") == b"kept\n"
    assert disk.read("/etc/lab.conf") == b"cfg\n"
    assert disk.read("/usr/local/bin/tool") == b"bin\n"
    assert not Path("/etc/lab.conf").exists()
    box.stop()
    assert not box.alive
    box.boot_id = "66666666-7777-8888-9999-000000000000"
    box.start()
    assert inside(box, "cat /root/note /proc/sys/kernel/random/boot_id").stdout == "kept\n" + box.boot_id + "\n"
