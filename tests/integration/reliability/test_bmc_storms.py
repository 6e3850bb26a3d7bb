"""Fault storms, bare-metal path (issue 20, part 2): the host's phases while its BMC misbehaves, for a few seeds.

The storm, drawn from a generator seeded per test so a failing seed replays: every second, the R730's iDRAC8 is
armed with a burst of one or two 503 answers (30 %) or a second of latency on the next request (10 %); and twice
per direction, at seeded moments, the iDRAC resets itself mid-operation (sessions dropped, virtual media ejected,
down, then busy with Dell's SYS518, then refusing logins for a moment, as a real iDRAC reboot does). The run must
converge in one go to what a calm run leaves (one claim, one install, the ISO gone; after the teardown the server
off, empty, wiped and released), and the recoveries the modules report show on the timeline.

Not in the storm:

* A reset before a run's first BMC task has ended (the claim up, the teardown's plan down). That task is where the
  run proves the inventory's credentials, so a login refused with 401 there is not tried again (role baremetal_host
  sets ``refused_login_retries`` only for the tasks after it); a reset then fails the run with the BMC's answer,
  which is the trade-off against the iDRAC's blocking of an address after failed logins, and the next run goes on.
* A full session table. iDRAC8 answers it at login with a 401, the same answer as a wrong password, and a client
  that asked again on every 401 would walk into the iDRAC's block of an address after failed logins; that fault has
  its own tests (sessions are closed after every task: test_session_cleanup).

A reset may fall while the install needs the virtual media (from the insert to the eject after the installer), and it
drops the media: ``host_provision`` puts the ISO back before the power-on, or restarts the stranded installer with it
(``media_reinserted`` on the timeline). This storm found that gap (seed 3, 2026-12-06), when the role noticed only at
``baremetal_host_install_timeout``; test_install_media_lost covers both moments in ``make test``.

The storm's timing follows the wall clock, so a seed replays the same faults, not always at the same request.
Slow (two host runs per seed, about two to four minutes each on two cores): ``make reliability`` runs seeds 1 to 3.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.metal.metal_site import CLUSTER, MetalLab, metal_lab, single_host_inventory
from integration.metal.test_baremetal_site import assert_provisioned, assert_torn_down

from lab.redfish.bmc import BmcState
from support.figures import record

FULL = os.environ.get("METALPLANE_RELIABILITY_FULL") == "1"
BMC = "r730-1"
# The host's phases only: the node's software after them never talks to the BMC.
HOST_PHASES = "phase:preflight,phase:lock,phase:claim,phase:boot,phase:install,phase:recovery"
TEARDOWN_PHASES = "phase:preflight,phase:lock,phase:teardown,phase:wipe,phase:release"
TICK_SECONDS = 1.0
# (fault, probability per tick, options): each tick arms at most one of them, tried in turn.
BURSTS: tuple[tuple[str, float, dict[str, Any]], ...] = (
    ("busy_503", 0.3, {}),
    ("latency", 0.1 / 0.7, {"seconds": 1.0}),
)
RESETS_PER_RUN = 2
# No BMC request for this long: one task has ended and the next has not started (an Ansible task takes longer to start
# its module).
IDLE_SECONDS = 0.4
# The ticks a reset may fall on, counted from the end of the run's first BMC task (see below), within the shortest
# run measured (a teardown, about 30 s on two cores). Not before the claim: a pool host whose BMC does not answer is
# never claimed (it is reported; another free host would be), and the pool here is the R730 alone.
RESET_TICKS = range(1, 9)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not FULL, reason="make reliability")]


class BmcStorm:
    """Arms the BMC's faults every tick and resets it at seeded ticks, until stopped."""

    def __init__(self, state: BmcState, seed: int, resets_from: Callable[[], bool]) -> None:
        self.state = state
        self.resets_from = resets_from
        self.random = random.Random(seed)
        self.armed: Counter[str] = Counter()
        self.resets_at = sorted(self.random.sample(list(RESET_TICKS), RESETS_PER_RUN))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bmc-storm", daemon=True)

    def _loop(self) -> None:
        tick = 0
        while not self._stop.wait(TICK_SECONDS):
            if tick or self.resets_from():
                tick += 1
            if tick in self.resets_at:
                self.state.manager_reset()
                self.armed["manager_reset"] += 1
                continue
            for fault, probability, options in BURSTS:
                if self.random.random() < probability:
                    count = self.random.randint(1, 2) if fault == "busy_503" else 1
                    self.state.inject(fault, count=count, **options)
                    self.armed[fault] += count
                    break

    def __enter__(self) -> BmcStorm:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.state.clear_faults()


@pytest.fixture
def lab(ansible_tmp: Path) -> Iterator[MetalLab]:
    with metal_lab(ansible_tmp) as metal:
        yield metal


def recoveries(timeline: Path) -> list[str]:
    report = json.loads((timeline / "timeline.json").read_text())
    return [str(e.get("recovered_by")) for e in report["clusters"][CLUSTER].get("recoveries") or []]


def after_the_first_bmc_task(lab: MetalLab, *, claimed: bool) -> Callable[[], bool]:
    """True once this run's first BMC task has ended: the BMC served it and has been idle since (the next task has
    not started). Up, that task is the claim (``claimed``: once the Lease is written); down, the teardown's plan."""
    state = lab.redfish.states[BMC]
    before = len(state.requests)

    def ended() -> bool:
        requests = state.requests
        idle = len(requests) > before and time.time() - requests[-1].time > IDLE_SECONDS
        return idle and (not claimed or bool(lab.held_by(CLUSTER)))

    return ended


def stormed_run(lab: MetalLab, seed: int, timeline: Path, *, claimed: bool, **site: Any) -> tuple[Any, BmcStorm]:
    storm = BmcStorm(lab.redfish.states[BMC], seed, resets_from=after_the_first_bmc_task(lab, claimed=claimed))
    with storm:
        run = lab.site(timeline=timeline, inventory=single_host_inventory(timeline, BMC), **site)
    return run, storm


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_host_up_and_down_in_a_bmc_storm_converge(lab: MetalLab, seed: int, tmp_path: Path) -> None:
    state = lab.redfish.states[BMC]
    order_before = state.boot["boot_seq"]
    (tmp_path / "up").mkdir()
    (tmp_path / "down").mkdir()
    up, up_storm = stormed_run(lab, seed, tmp_path / "up", claimed=True, tags=HOST_PHASES)
    assert up.rc == 0, up.stdout[-4000:] + up.stderr[-2000:]
    assert_provisioned(lab, BMC)
    up_kinds = recoveries(tmp_path / "up")
    down, down_storm = stormed_run(
        lab, seed + 100, tmp_path / "down", claimed=False, tags=TEARDOWN_PHASES, cluster_state="absent"
    )
    assert down.rc == 0, down.stdout[-4000:] + down.stderr[-2000:]
    assert_torn_down(lab, BMC, order_before)
    down_kinds = recoveries(tmp_path / "down")
    armed = up_storm.armed + down_storm.armed
    fired = {name: count for name, count in state.counters.items() if name.startswith(("fault:", "busy:"))}
    record(
        f"storms_bmc_seed_{seed}",
        {
            "converged": 2,
            "installs": lab.host(BMC)["installs"],
            "BMC requests": len(state.requests),
            "iDRAC resets": armed["manager_reset"],
            "503 bursts armed": armed["busy_503"],
            "faults fired": sum(fired.values()),
            "recoveries on the timeline": len(up_kinds) + len(down_kinds),
            "recovery kinds": ", ".join(sorted(set(up_kinds + down_kinds))) or "none",
        },
        "site.yml's host phases up, then down, of the lab's R730 while its iDRAC8 answers 503 bursts (30 % of the "
        "seconds) and latency (10 %), and resets itself twice per run at seeded moments; "
        "faults fired counted by the BMC, recoveries from the timeline callback",
    )
    assert armed["manager_reset"] == 2 * RESETS_PER_RUN, "a run ended before its resets: widen RESET_TICKS"
    assert sum(fired.values()) > 0
    assert "api_retry" in up_kinds + down_kinds, "the BMC's busy answers were asked again: the timeline must say so"
