"""PID 1 of a simulated host's sandbox: build its root from overlays, then reap children until told to stop.

Why a separate stdlib-only script: it runs *inside* fresh user, mount, PID and UTS namespaces
(``unshare --user --map-root-user --mount --pid --uts --fork``), where it is root over nothing but
its own mounts. It assembles the root the sessions will see and then detaches the real root
(``pivot_root`` + lazy unmount), so nothing a session runs can reach the real machine's files,
devices or kernel settings:

- ``/`` overlay: lower = the host's firmware layer (fake DMI/NIC files under /sys) and the lab's
  skeleton; upper = the host's disk. ``/usr`` overlay: lower = the lab's shims, then the real
  ``/usr`` (read-only by overlay semantics); ``/etc`` overlay: lower = the real ``/etc``. The
  uppers live in the host's disk directory, so what a session writes survives a reboot and a
  reinstall wipes it.
- ``/proc`` is a new procfs of the PID namespace with ``/proc/sys`` read-only and
  ``/proc/sysrq-trigger`` masked (a real root outside would otherwise pass their DAC checks);
  ``/proc/sys/kernel/random/boot_id`` is this boot's id (Ansible's reboot module compares it).
- ``/dev`` is a small tmpfs with the harmless nodes bound in (null, zero, full, random, urandom,
  tty) and a private devpts; no block device of the real machine is visible.
- ``/run`` is a fresh tmpfs per boot, with the host's control directory (the shims' socket) at
  ``/run/metal-lab``.

Usage: ``sandbox_init.py SPEC.json`` (see ``lab.metal.sandbox.Sandbox``); ``--probe DIR`` only
checks that an overlay can be mounted here and exits.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import platform
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
# pivot_root(2) has no libc wrapper; its syscall number per architecture (asm/unistd*.h).
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
CONTROL_MOUNT = "run/metal-lab"
# procfs files a real root outside would pass the DAC checks of, and that act on the machine.
MASKED_PROC_FILES = ("sysrq-trigger", "kcore", "kmsg", "timer_list")
REAP_IDLE_SECONDS = 0.5  # how often PID 1 looks for orphans to reap when it has no children

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount(source: str, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {fstype or 'bind'} {source} on {target}",
    )


def overlay(lower: list[str], upper: str, work: str, target: str) -> None:
    """Mount an overlay; ``userxattr`` first (unprivileged overlayfs, Linux 5.11+), then without."""
    options = f"lowerdir={':'.join(lower)},upperdir={upper},workdir={work}"
    try:
        mount("overlay", target, "overlay", 0, options + ",userxattr")
    except OSError:
        mount("overlay", target, "overlay", 0, options)


def probe(directory: str) -> int:
    base = Path(directory)
    for name in ("lower", "upper", "work", "merged"):
        (base / name).mkdir(exist_ok=True)
    (base / "lower" / "file").write_text("lower\n")
    try:
        overlay([str(base / "lower")], str(base / "upper"), str(base / "work"), str(base / "merged"))
        (base / "merged" / "file").write_text("upper\n")
    except OSError as exc:
        print(f"overlay: {exc}", flush=True)
        return 1
    print("ok", flush=True)
    return 0


def _bind(source: str, target: str, flags: int = 0) -> None:
    mount(source, target, None, MS_BIND | flags)


def _readonly(target: str, keep: int = 0) -> None:
    mount("none", target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | keep)


def build_root(spec: dict[str, Any]) -> str:
    root = spec["mountpoint"]
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    overlay(spec["root_lower"], spec["root_upper"], spec["root_work"], root)
    for name in ("usr", "etc"):
        os.makedirs(f"{root}/{name}", exist_ok=True)
        overlay(spec[f"{name}_lower"], spec[f"{name}_upper"], spec[f"{name}_work"], f"{root}/{name}")
    # /run: fresh per boot, with the control directory and this boot's id
    os.makedirs(f"{root}/run", exist_ok=True)
    mount("tmpfs", f"{root}/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    os.makedirs(f"{root}/{CONTROL_MOUNT}", exist_ok=True)
    _bind(spec["control_dir"], f"{root}/{CONTROL_MOUNT}")
    Path(f"{root}/run/.boot_id").write_text(spec["boot_id"] + "\n")
    # /proc of this PID namespace, with the kernel's knobs out of reach
    os.makedirs(f"{root}/proc", exist_ok=True)
    proc_flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    mount("proc", f"{root}/proc", "proc", proc_flags)
    _bind(f"{root}/run/.boot_id", f"{root}/proc/sys/kernel/random/boot_id")
    _bind(f"{root}/proc/sys", f"{root}/proc/sys", MS_REC)
    _readonly(f"{root}/proc/sys", proc_flags)
    for masked in MASKED_PROC_FILES:
        if os.path.exists(f"{root}/proc/{masked}"):
            _bind("/dev/null", f"{root}/proc/{masked}")
    # /dev: only harmless nodes
    os.makedirs(f"{root}/dev", exist_ok=True)
    mount("tmpfs", f"{root}/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755")
    for node in DEV_NODES:
        Path(f"{root}/dev/{node}").touch()
        _bind(f"/dev/{node}", f"{root}/dev/{node}")
    os.makedirs(f"{root}/dev/pts")
    mount("devpts", f"{root}/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
    os.symlink("pts/ptmx", f"{root}/dev/ptmx")
    os.makedirs(f"{root}/dev/shm")
    mount("tmpfs", f"{root}/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(target, f"{root}/dev/{name}")
    os.symlink("/proc/self/fd/2", f"{root}/dev/stderr")
    return root


def enter_root(root: str) -> None:
    """pivot_root into ``root`` and detach the real root (chroot where pivot_root is unavailable)."""
    number = SYS_PIVOT_ROOT.get(platform.machine())
    _bind(root, root, MS_REC)
    os.chdir(root)
    if number is not None:
        os.makedirs(".oldroot", exist_ok=True)
        if _libc.syscall(number, b".", b".oldroot") == 0:
            os.chroot(".")
            _check(_libc.umount2(b"/.oldroot", MNT_DETACH), "umount the old root")
            os.rmdir("/.oldroot")
            os.chdir("/")
            return
    os.chroot(".")
    os.chdir("/")


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "--probe":
        return probe(argv[2])
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # die with the unshare process that started us
    spec = json.loads(Path(argv[1]).read_text())
    try:
        root = build_root(spec)
        socket.sethostname(spec["hostname"])
        enter_root(root)
    except OSError as exc:
        print(f"error: {exc}", flush=True)
        return 1

    def _stop(_signum: int, _frame: Any) -> None:
        raise SystemExit(0)  # PID 1 exiting ends the namespace: every process in it is killed

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print("ready", flush=True)
    os.close(1)
    while True:  # reap what gets re-parented to us (PEP 475 retries wait() after signals)
        try:
            os.wait()
        except ChildProcessError:
            time.sleep(REAP_IDLE_SECONDS)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
