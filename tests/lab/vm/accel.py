"""Pick QEMU's accelerator: KVM only when a quick boot proves it works, TCG otherwise.

Why a probe and not ``/dev/kvm``'s existence: on the machine this lane was written on, ``/dev/kvm`` exists
but KVM guests hang (the kernel's real-mode setup prints "Probing EDD" and nothing follows), while TCG boots
the same kernel to "Linux version" in under 3 seconds. So the probe boots the installer's kernel directly
(``-kernel``, no firmware menu, no disk) with KVM and waits for the kernel's first line on the serial port;
only when it appears within ``PROBE_SECONDS`` is KVM used. The lane's budgets are TCG's, so a slow or broken
KVM costs at most the probe.

``METALPLANE_VM_ACCEL=kvm|tcg`` skips the probe (``auto``, the default, probes).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from lab.vm.machine import QEMU

PROBE_SECONDS = 15.0  # TCG prints "Linux version" after ~3 s here; KVM, when it works, in well under 1 s
KERNEL_FIRST_LINE = "Linux version"
ENV = "METALPLANE_VM_ACCEL"
KVM_DEVICE = Path("/dev/kvm")


def probe(kernel: Path, qemu: str = QEMU, seconds: float = PROBE_SECONDS) -> tuple[str, str]:
    """``(accel, why)``: ``kvm`` when a KVM guest printed the kernel's first line in time, else ``tcg``."""
    forced = os.environ.get(ENV, "auto").strip().lower()
    if forced in ("kvm", "tcg"):
        return forced, f"{ENV}={forced}"
    if not KVM_DEVICE.exists() or not os.access(KVM_DEVICE, os.R_OK | os.W_OK):
        return "tcg", f"{KVM_DEVICE} is absent or not writable"
    work = Path(tempfile.mkdtemp(prefix="vm-accel-"))
    serial = work / "serial.log"
    argv = [
        qemu,
        "-accel",
        "kvm",
        "-m",
        "256",
        "-nodefaults",
        "-display",
        "none",
        "-no-reboot",
        "-kernel",
        str(kernel),
        "-append",
        "console=ttyS0 panic=-1",
        "-chardev",
        f"file,id=serial0,path={serial}",
        "-serial",
        "chardev:serial0",
    ]
    started = time.monotonic()
    popen = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        while time.monotonic() - started < seconds:
            if serial.exists() and KERNEL_FIRST_LINE in serial.read_text(errors="replace"):
                return "kvm", f"a KVM guest printed {KERNEL_FIRST_LINE!r} after {time.monotonic() - started:.1f}s"
            if popen.poll() is not None:
                stderr = popen.stderr.read().decode(errors="replace").strip() if popen.stderr else ""
                return "tcg", f"QEMU with KVM exited ({popen.returncode}): {stderr[-300:]}"
            time.sleep(0.2)
        return "tcg", f"a KVM guest printed no {KERNEL_FIRST_LINE!r} within {seconds:g}s"
    finally:
        if popen.poll() is None:
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()
        if popen.stderr is not None:
            popen.stderr.close()
        shutil.rmtree(work, ignore_errors=True)
