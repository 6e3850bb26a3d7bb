"""The model behind bench_metal_ready's projection: the hardware events of one up and their real durations.

Why a file of its own: it is pure (no lab, no Ansible), so the unit lanes of every controller version test it, and
a user's own figures (``--waits``) go through the same code as the estimates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class RealWait:
    """The real duration of one hardware event, the phase it falls in, and what the figure rests on."""

    phase: str
    seconds: float
    basis: str


# Estimates for a Dell R730 (2x Xeon E5-2600 v4, 256 GiB, 2x V100) on a data-centre LAN with local mirrors. None of
# them was measured by this project; replace them with your own (--waits FILE, the same keys). The POST is
# calibrated on the one real total there is: the reference run (Metal3) took about 21 minutes to inference-ready
# through 5 POSTs (inspection ramdisk, deploy ramdisk, installed OS, a BIOS job, the reboot that unloads nouveau),
# 4 boots, an image write (about 2 minutes) and the same node software as below (about 9 minutes): about 90 s a POST.
REAL_WAITS: dict[str, RealWait] = {
    "post": RealWait(
        "install", 90, "calibrated: the reference run's 21 minutes less its other steps, over its 5 POSTs"
    ),
    "installer": RealWait("install", 300, "estimate: EL 10 kickstart from a local mirror, with headers and dkms"),
    "os_boot": RealWait("install", 45, "estimate: boot loader to sshd (installer kernel or installed system)"),
    "driver_build": RealWait("driver", 150, "estimate: the .run installer's DKMS build of the 580 kernel module"),
    "kubeadm_init": RealWait(
        "kubernetes", 150, "estimate: kubeadm's image pulls, the control plane's start, Cilium's images and agent"
    ),
    "storage": RealWait("storage", 120, "estimate: Longhorn's images and its managers on one node"),
    "adoption": RealWait("adoption", 120, "estimate: Modelplane's NFD and NVIDIA DRA driver images, ResourceSlices"),
}


def hardware_events(host: dict[str, Any]) -> dict[str, int]:
    """The real hardware waits one up went through, counted from the simulated host's records."""
    commands = [call["argv"] for call in host["shim_calls"]]
    return {
        "post": len(host["posts"]),
        "installer": host["installs"],
        # Each POST that started an operating system (the installer's kernel or the installed one); a POST in which
        # the Lifecycle Controller applied BIOS jobs only resets the server.
        "os_boot": sum(1 for post in host["posts"] if post in ("VirtualCD", "Hdd")),
        "driver_build": sum(1 for argv in commands if argv[0] == "nvidia-installer"),
        "kubeadm_init": sum(1 for argv in commands if argv[:2] == ["kubeadm", "init"]),
        "storage": 1,
        "adoption": 1,
    }


def project(measured: dict[str, Any], waits: dict[str, RealWait]) -> dict[str, float]:
    """Seconds per phase on real hardware: the collection's own cost plus each event's real duration (a model)."""
    projected = dict(measured["phases"])
    for event, count in measured["events"].items():
        wait = waits[event]
        projected[wait.phase] = projected.get(wait.phase, 0.0) + count * wait.seconds
    return projected


def load_waits(path: Path | None) -> dict[str, RealWait]:
    if path is None:
        return REAL_WAITS
    given = yaml.safe_load(path.read_text()) or {}
    unknown = sorted(set(given) - set(REAL_WAITS))
    if unknown:
        raise SystemExit(f"{path}: unknown events {unknown}; the events are {sorted(REAL_WAITS)}")
    return {
        event: RealWait(wait.phase, float(given[event]), f"{path.name}") if event in given else wait
        for event, wait in REAL_WAITS.items()
    }
