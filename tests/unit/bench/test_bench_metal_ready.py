"""The time-to-ready benchmark's counting of hardware events and its projection (tests/bench/metal_ready_model.py).

Why test it: the page's POST counts and projected minutes are read as facts about real hardware; an event counted
twice, or a wait added to the wrong phase, would move the projection by minutes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.metal_ready_model import REAL_WAITS, RealWait, hardware_events, load_waits, project

# A host snapshot as the lab's MetalHost.snapshot() gives it, after an iDRAC8 install from a disk-first order.
IDRAC8_UP = {
    "posts": ["bios-settings", "VirtualCD", "bios-settings", "Hdd"],
    "installs": 1,
    "shim_calls": [
        {"argv": ["apt-get", "install", "-y", "dkms"]},
        {"argv": ["nvidia-installer", "--silent", "--dkms"]},
        {"argv": ["kubeadm", "init", "--config", "/etc/kubernetes/kubeadm.yaml"]},
        {"argv": ["kubeadm", "version", "-o", "short"]},
    ],
}


@pytest.mark.parametrize(
    ("posts", "expected_posts", "expected_os_boots"),
    [
        (["bios-settings", "VirtualCD", "bios-settings", "Hdd"], 4, 2),  # iDRAC8: two boot-order jobs
        (["VirtualCD", "Hdd"], 2, 2),  # the order needed no change
        (["VirtualCD", "Hdd", "Hdd"], 3, 3),  # a reboot of the installed system (e.g. to unload nouveau)
    ],
)
def test_hardware_events_count_posts_and_os_boots(
    posts: list[str], expected_posts: int, expected_os_boots: int
) -> None:
    events = hardware_events({**IDRAC8_UP, "posts": posts})
    assert (events["post"], events["os_boot"]) == (expected_posts, expected_os_boots)


def test_hardware_events_count_each_driver_build_and_kubeadm_init_once() -> None:
    events = hardware_events(IDRAC8_UP)
    assert (events["installer"], events["driver_build"], events["kubeadm_init"]) == (1, 1, 1)


def test_projection_adds_each_event_to_its_phase() -> None:
    waits = {event: RealWait(wait.phase, 10.0, "test") for event, wait in REAL_WAITS.items()}
    measured = {"phases": {"install": 5.0, "driver": 2.0, "smoke": 1.0}, "events": hardware_events(IDRAC8_UP)}
    projected = project(measured, waits)
    # install: 5 s own + (4 POSTs + 1 installer + 2 OS boots) x 10 s
    assert projected["install"] == pytest.approx(75.0)
    assert projected["driver"] == pytest.approx(12.0)
    assert projected["kubernetes"] == pytest.approx(10.0)
    assert projected["smoke"] == pytest.approx(1.0)  # no hardware wait there


def test_waits_from_a_file_replace_only_the_events_given(tmp_path: Path) -> None:
    path = tmp_path / "waits.yml"
    path.write_text("post: 240\n")
    waits = load_waits(path)
    assert waits["post"] == RealWait("install", 240.0, "waits.yml")
    assert waits["installer"] == REAL_WAITS["installer"]


def test_waits_from_a_file_refuse_an_unknown_event(tmp_path: Path) -> None:
    path = tmp_path / "waits.yml"
    path.write_text("reboot: 60\n")
    with pytest.raises(SystemExit, match="unknown events \\['reboot'\\]"):
        load_waits(path)
