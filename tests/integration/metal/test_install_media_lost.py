"""An iDRAC reset that drops the installer ISO, twice in one install: the run puts it back and converges.

Why: a BMC reset ejects the virtual media (Dell documents it for the iDRAC; the lab's BMC does it too). Found by the
BMC storm of the reliability suite (seed 3): a reset between the insert and the power-on let the server boot without
its ISO, and a reset under the running installer left it at an error screen (the lab's host, like a real installer,
stops when its CD vanishes); either way the role noticed only when ``baremetal_host_install_timeout`` ran out.

Here the R730's iDRAC8 resets itself twice at those two moments of one site.yml run (the host's phases only): after
the insert and the one-time boot, before the power-on; and as soon as the installer runs. The run must converge in
one go with exactly one finished install, the ISO gone, and the recovery on the timeline (``media_reinserted``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.metal.metal_site import CLUSTER, MetalLab, metal_lab, single_host_inventory
from integration.metal.test_baremetal_site import assert_provisioned

from lab.metal.host import INSTALLER_FAILED, INSTALLING
from support.figures import record

BMC = "r730-1"
HOST_PHASES = "phase:preflight,phase:lock,phase:claim,phase:boot,phase:install,phase:recovery"
POLL_SECONDS = 0.05
# No BMC request for this long: one task has ended and the next has not logged in (an Ansible task takes longer to
# start its module).
IDLE_SECONDS = 0.4


@pytest.fixture
def lab(ansible_tmp: Path) -> Iterator[MetalLab]:
    with metal_lab(ansible_tmp) as metal:
        yield metal


class MediaDropper:
    """Resets the BMC once when the ISO is in and the one-time boot set with the server still off, and once when
    the installer runs."""

    def __init__(self, lab: MetalLab) -> None:
        self.state = lab.redfish.states[BMC]
        self.host = lab.fleet.host(BMC)
        self.moments: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="media-dropper", daemon=True)

    def _before_power_on(self) -> bool:
        """The ISO in, the one-time boot set (Dell's SCP import), the server off, and the BMC idle between two tasks
        (the boot task has stopped polling its import; the install task has not started)."""
        inserted = any(slot["inserted"] for slot in self.state.virtual_media.values())
        requests = self.state.requests
        idle = bool(requests) and time.time() - requests[-1].time > IDLE_SECONDS
        return (
            inserted and idle and self.state.power_state == "Off" and self.state.scp_boot.get("BootOnce") == "Enabled"
        )

    def _loop(self) -> None:
        while not self._stop.wait(POLL_SECONDS) and len(self.moments) < 2:
            if not self.moments and self._before_power_on():
                self.state.manager_reset()
                self.moments.append("before the power-on")
            elif self.moments and "under the installer" not in self.moments and self.host.phase == INSTALLING:
                self.state.manager_reset()
                self.moments.append("under the installer")

    def __enter__(self) -> MediaDropper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@pytest.mark.timeout(1200)
def test_iso_dropped_before_the_power_on_and_under_the_installer_is_put_back(lab: MetalLab, tmp_path: Path) -> None:
    with MediaDropper(lab) as dropper:
        run = lab.site(timeline=tmp_path, inventory=single_host_inventory(tmp_path, BMC), tags=HOST_PHASES)
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert dropper.moments == ["before the power-on", "under the installer"]
    assert_provisioned(lab, BMC)  # one finished install, the ISO ejected and deleted, the record installed
    phases = [(phase, reason) for _at, phase, reason in lab.fleet.host(BMC).log.phases]
    assert any(p == INSTALLER_FAILED and "lost its media" in (r or "") for p, r in phases), phases
    report = json.loads((tmp_path / "timeline.json").read_text())
    kinds = [str(e.get("recovered_by")) for e in report["clusters"][CLUSTER].get("recoveries") or []]
    assert "media_reinserted" in kinds, kinds
    assert "inserted it again" in run.stdout + run.stderr
    record(
        "storms_bmc_media_dropped",
        {
            "converged": 1,
            "iDRAC resets": len(dropper.moments),
            "installer restarts": sum("lost its media" in (r or "") for p, r in phases if p == INSTALLER_FAILED),
            "finished installs": lab.host(BMC)["installs"],
            "media_reinserted on the timeline": kinds.count("media_reinserted"),
        },
        "site.yml's host phases of the lab's R730 while its iDRAC8 resets itself (ejecting the virtual media) after "
        "the ISO's insert and one-time boot, and again under the running installer",
    )
