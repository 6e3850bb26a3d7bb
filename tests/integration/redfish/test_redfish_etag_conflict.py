"""``redfish_boot order`` when another writer changes the boot order between the read and the PATCH.

The lab fault ``concurrent_order_change`` moves the first boot entry last just before the next
``Boot.BootOrder`` PATCHes, so the ETag the module read no longer matches and the BMC answers
412. sushy's own PATCH would then resend the stale plan without ``If-Match`` and overwrite the
other writer; the module must instead re-read, re-plan from the other writer's order and write
once more with the new ETag (``replanned``), and when the order changes again it must fail with
a conflict naming ``order``, leaving the other writer's order in place. The BMC's request log
shows every PATCH: never one after the second 412, never a 200 for a stale plan.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.redfish._requestlog import select
from integration.redfish.conftest import StartLab

from lab.redfish.server import BmcSpec, RedfishLab

FQ = "metalplane.inference."
ETAG_PERSONALITIES = ("idrac9", "generic")  # Boot.BootOrder with ETags; iDRAC8 has BootSources only
START = ["Boot0002", "Boot0001", "Boot0003"]  # the lab's default order


def _rotate(order: list[str]) -> list[str]:
    """What the lab's other writer does: first entry last."""
    return order[1:] + order[:1]


def _arm(count: int) -> dict[str, Any]:
    return {
        "name": f"another writer, {count}x",
        "ansible.builtin.uri": {
            "url": "{{ lab_control }}/faults",
            "method": "POST",
            "body_format": "json",
            "body": {"fault": "concurrent_order_change", "count": count},
            "ca_path": "{{ ca_path }}",
        },
    }


C = {"bmc_url": "{{ bmc_url }}", "username": "root", "password": "calvin", "ca_cert": "{{ ca_path }}"}
TASKS: list[dict[str, Any]] = [
    _arm(1),
    {"name": "optical first", FQ + "redfish_boot": {**C, "order": ["Boot0003"]}},
    {
        "name": "bmc state after the first write",
        "ansible.builtin.uri": {"url": "{{ lab_control }}/state", "ca_path": "{{ ca_path }}"},
    },
    _arm(2),
    {"name": "disk first", FQ + "redfish_boot": {**C, "order": ["Boot0002"]}, "ignore_errors": True},
]


@pytest.fixture(scope="module")
def lab(start_redfish_lab: StartLab) -> RedfishLab:
    return start_redfish_lab([BmcSpec(name=p, personality=p, power_state="Off") for p in ETAG_PERSONALITIES])


def _patches(lab: RedfishLab, name: str) -> list[int]:
    return [r.status for r in select(lab.bmc(name).requests, method="PATCH", path_contains="/Systems/")]


def test_concurrent_boot_order_change(
    playbook: Callable[..., Any], lab: RedfishLab, tmp_path: Path, ansible_tmp: Path
) -> None:
    hosts = {
        p: {
            "ansible_connection": "local",
            "bmc_url": lab.url(p),
            "lab_control": f"https://127.0.0.1:{lab.port}/lab/bmc/{p}",
            "ca_path": lab.ca_path,
        }
        for p in ETAG_PERSONALITIES
    }
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    play = {"name": "etag", "hosts": "all", "gather_facts": False, "tasks": TASKS}
    run = playbook([play], inventory=inventory, diff=True, env={"TMPDIR": str(ansible_tmp)})
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]

    for name in ETAG_PERSONALITIES:
        bmc = lab.bmc(name)
        pending = bmc.p.boot_order_pending  # iDRAC9: the written order waits for the next boot

        # -- one concurrent change: 412, re-read, re-planned from the other writer's order ----------
        theirs = _rotate(START)  # ["Boot0001", "Boot0003", "Boot0002"]
        stale_plan = ["Boot0003", "Boot0002", "Boot0001"]  # from START: what sushy would have resent
        replanned = ["Boot0003", "Boot0001", "Boot0002"]
        first = run.task("optical first", host=name)
        assert first["changed"] is True, first
        assert first["plan"]["order"] == replanned
        assert first["diff"]["before"]["order"] == theirs
        assert first["diff"]["after"]["order"] == replanned
        assert [a.get("replanned") for a in first["actions"]] == [True]
        seen = run.task("bmc state after the first write", host=name)["json"]["boot"]
        assert seen["order"] == (theirs if pending else replanned)
        assert seen["pending_order"] == (replanned if pending else None)
        assert replanned != stale_plan
        assert _patches(lab, name)[:2] == [412, 200]

        # -- the order changes again before the second PATCH: conflict, the other writer's order stays
        second = run.task("disk first", host=name)
        assert second.get("failed") is True, second
        assert second["error"]["kind"] == "conflict"
        assert second["error"]["field"] == "order"
        assert second["msg"].startswith("order: another writer changed the boot order"), second["msg"]
        assert _patches(lab, name)[2:] == [412, 412]  # no third PATCH, none without If-Match
        current_before = theirs if pending else replanned  # what the task read
        assert bmc.boot_options_order == _rotate(_rotate(current_before))
        if pending:
            assert bmc.pending_boot_order == replanned  # the first task's write, untouched
        assert bmc.counters["fault:concurrent_order_change"] == 3
        assert bmc.counters["etag_mismatch"] == 3
        assert bmc.peek("concurrent_order_change") is None
