"""The provisioner's decisions (``_metal/provision.py``): where a claimed host stands and which steps are left.

Why table-driven: each row is one situation a killed, resumed or scheduled run can find the host in (the record
on the claim, the BMC's power and virtual CD, what an SSH login shows), and the plan for it. The guarantees that
matter are here: an installed host is never planned for another install, the install's power-off and a power
cut are told apart by the record, a teardown wipes the recorded disk and nothing else, and refuses a node whose
marker names another cluster.
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError
from ansible_collections.metalplane.inference.plugins.module_utils._metal import provision as pv

CLUSTER = "r730"
WWN = "0x5000c500d5cdd26b"
DISK = {"wwn": WWN}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBmF root@r730"


def record(phase: str | None, generation: int = 1, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"generation": generation, "root_disk": DISK, "ssh_host_key": KEY, **extra}
    if phase:
        out["phase"] = phase
    return out


def up(marker_generation: int = 1, cluster: str = CLUSTER, disks: tuple[dict[str, Any], ...] = ()) -> pv.SshProbe:
    return pv.SshProbe(reachable=True, marker={"cluster": cluster, "generation": marker_generation}, disks=disks)


DOWN = pv.SshProbe(error="Connection refused")
ISO = "http://10.0.0.5/hosts/r730.iso"
INSTALL_TAIL = [pv.STEP_POWER_ON, pv.STEP_WAIT_SSH, pv.STEP_RECORD_INSTALLED]
FULL = [s for s in pv.INSTALL_STEPS if s not in (pv.STEP_VIRTUAL_CD_FIRST, pv.STEP_DISK_FIRST)]


@pytest.mark.parametrize(
    ("rec", "observed", "status", "steps"),
    [
        pytest.param({}, pv.Observed("Off"), "new", FULL, id="fresh host"),
        pytest.param(record(pv.PREPARING), pv.Observed("Off", ISO), "new", FULL, id="killed before power-on"),
        pytest.param(record(pv.WIPED), pv.Observed("On", ssh=DOWN), "new", FULL, id="wiped earlier"),
        pytest.param(record(pv.INSTALLED), pv.Observed("On", ssh=up()), "provisioned", [], id="provisioned"),
        pytest.param(
            record(pv.INSTALLED), pv.Observed("On", ISO, up()), "provisioned", [pv.STEP_EJECT], id="media left in"
        ),
        pytest.param(
            record(pv.INSTALLING),
            pv.Observed("On", ssh=up()),
            "provisioned",
            [pv.STEP_DELETE_ISO, pv.STEP_RECORD_INSTALLED],
            id="killed before recording installed",
        ),
        pytest.param(
            record(pv.INSTALLED),
            pv.Observed("Off", ssh=DOWN),
            "powered_off",
            [pv.STEP_RECOVER, pv.STEP_WAIT_SSH],
            id="power cut: recover, never reinstall",
        ),
        pytest.param(
            record(pv.INSTALLED), pv.Observed("On", ssh=DOWN), "booting", [pv.STEP_WAIT_SSH], id="installed, booting"
        ),
        pytest.param(
            record(pv.INSTALLING),
            pv.Observed("On", ISO, DOWN),
            "installing",
            [pv.STEP_WAIT_INSTALLED, pv.STEP_EJECT, pv.STEP_DELETE_ISO, *INSTALL_TAIL],
            id="installer running",
        ),
        pytest.param(
            record(pv.INSTALLING),
            pv.Observed("Off", ISO, DOWN),
            "install_finished",
            [pv.STEP_EJECT, pv.STEP_DELETE_ISO, *INSTALL_TAIL],
            id="installer powered off",
        ),
        # killed after the eject: the ISO is still deleted (it was left served before the fix)
        pytest.param(
            record(pv.INSTALLING),
            pv.Observed("Off", ssh=DOWN),
            "ejected",
            [pv.STEP_DELETE_ISO, *INSTALL_TAIL],
            id="ejected",
        ),
        pytest.param(
            record(pv.INSTALLING),
            pv.Observed("On", ssh=DOWN),
            "booting",
            [pv.STEP_DELETE_ISO, pv.STEP_WAIT_SSH, pv.STEP_RECORD_INSTALLED],
            id="booting from disk",
        ),
        pytest.param(
            record(pv.INSTALLED),
            pv.Observed("On", ssh=up(cluster="other")),
            "booting",
            [pv.STEP_WAIT_SSH],
            id="a foreign marker is not this install",
        ),
    ],
)
def test_plan_present(rec: dict[str, Any], observed: pv.Observed, status: str, steps: list[str]) -> None:
    plan = pv.plan_present(rec, observed, cluster=CLUSTER, generation=1, virtual_cd_fix=False)
    assert (plan.status, plan.steps) == (status, steps)


def test_a_bumped_generation_installs_again() -> None:
    plan = pv.plan_present(
        record(pv.INSTALLED, generation=1),
        pv.Observed("On", ssh=up(1)),
        cluster=CLUSTER,
        generation=2,
        virtual_cd_fix=True,
    )
    assert plan.status == "new"
    # the iDRAC8 boot order fix included, only because it is needed; the disk is not put first again after it
    assert plan.steps == [s for s in pv.INSTALL_STEPS if s != pv.STEP_DISK_FIRST]
    assert "not this claim's generation" in plan.why


# Each persistent boot-order change costs an iDRAC8 a POST (a BIOS job): which install steps each choice plans.
BOOT_ORDER_CHANGES = [
    pytest.param(False, False, [], id="order already right: no change, two POSTs"),
    pytest.param(True, False, [pv.STEP_VIRTUAL_CD_FIRST], id="iDRAC8 from disk first: one change"),
    pytest.param(True, True, [pv.STEP_VIRTUAL_CD_FIRST, pv.STEP_DISK_FIRST], id="and the disk first again"),
    pytest.param(False, True, [pv.STEP_DISK_FIRST], id="disk first asked, no fix needed"),
]


@pytest.mark.parametrize(("virtual_cd_fix", "disk_first", "changes"), BOOT_ORDER_CHANGES)
def test_boot_order_changes_only_where_wanted(virtual_cd_fix: bool, disk_first: bool, changes: list[str]) -> None:
    plan = pv.plan_present(
        {}, pv.Observed("Off"), cluster=CLUSTER, generation=1, virtual_cd_fix=virtual_cd_fix, disk_first=disk_first
    )
    assert [s for s in plan.steps if s in (pv.STEP_VIRTUAL_CD_FIRST, pv.STEP_DISK_FIRST)] == changes
    resumed = pv.plan_present(
        record(pv.INSTALLING),
        pv.Observed("Off", ISO, DOWN),
        cluster=CLUSTER,
        generation=1,
        virtual_cd_fix=virtual_cd_fix,
        disk_first=disk_first,
    )
    assert (pv.STEP_DISK_FIRST in resumed.steps) is disk_first  # a run resumed after the installer, the same rule


@pytest.mark.parametrize(
    ("before", "generation", "changes", "after"),
    [
        pytest.param(
            {},
            1,
            {"phase": pv.PREPARING, "root_disk": DISK, "boot_order": ["a", "b"]},
            {"generation": 1, "phase": pv.PREPARING, "root_disk": DISK, "boot_order": ["a", "b"]},
            id="first record",
        ),
        pytest.param(
            {"generation": 1, "phase": pv.PREPARING, "boot_order": ["a", "b"]},
            1,
            {"phase": pv.INSTALLING, "ssh_host_key": KEY, "boot_order": ["b", "a"]},
            {"generation": 1, "phase": pv.INSTALLING, "ssh_host_key": KEY, "boot_order": ["a", "b"]},
            id="the boot order before the first change is kept",
        ),
        pytest.param(
            {"generation": 1, "phase": pv.INSTALLED, "root_disk": DISK, "ssh_host_key": KEY, "boot_order": ["a"]},
            2,
            {"phase": pv.PREPARING, "root_disk": {"serial": "S1"}},
            {"generation": 2, "phase": pv.PREPARING, "root_disk": {"serial": "S1"}, "boot_order": ["a"]},
            id="a new generation starts afresh but keeps the boot order",
        ),
    ],
)
def test_updated_record(
    before: dict[str, Any], generation: int, changes: dict[str, Any], after: dict[str, Any]
) -> None:
    assert pv.updated_record(before, generation, **changes) == after


def test_phase_belongs_to_its_generation() -> None:
    assert pv.phase_of(record(pv.INSTALLED, generation=1), 1) == pv.INSTALLED
    assert pv.phase_of(record(pv.INSTALLED, generation=1), 2) is None
    assert pv.phase_of({"generation": 1, "phase": "bogus"}, 1) is None


@pytest.mark.parametrize(
    ("rec", "observed", "steps", "wipe"),
    [
        pytest.param(
            record(pv.INSTALLED, boot_order=["a"]),
            pv.Observed("On", ssh=up(disks=({"path": "/dev/sdb", "wwn": WWN, "serial": "X"},))),
            [pv.STEP_WIPE, pv.STEP_RESTORE_BOOT_ORDER, pv.STEP_POWER_OFF, pv.STEP_RELEASE, pv.STEP_DELETE_ISO],
            {"disk": DISK, "device": "/dev/sdb", "via": "ssh"},
            id="installed and reachable: the lsblk row with the WWN",
        ),
        pytest.param(
            record(pv.INSTALLED),
            pv.Observed("On", ssh=up()),
            [pv.STEP_WIPE, pv.STEP_POWER_OFF, pv.STEP_RELEASE, pv.STEP_DELETE_ISO],
            {"disk": DISK, "device": f"/dev/disk/by-id/wwn-{WWN}", "via": "ssh"},
            id="no lsblk: udev's by-id link of the WWN",
        ),
        pytest.param(
            record(pv.INSTALLED),
            pv.Observed("Off", ssh=DOWN),
            [pv.STEP_RECOVER, pv.STEP_WAIT_SSH, pv.STEP_WIPE, pv.STEP_POWER_OFF, pv.STEP_RELEASE, pv.STEP_DELETE_ISO],
            {"disk": DISK, "device": None, "via": "ssh after power on"},
            id="installed and off: powered on to wipe over SSH",
        ),
        pytest.param(
            record(pv.INSTALLING),
            pv.Observed("On", ISO, DOWN),
            [pv.STEP_WIPE, pv.STEP_EJECT, pv.STEP_POWER_OFF, pv.STEP_RELEASE, pv.STEP_DELETE_ISO],
            {"disk": DISK, "device": None, "via": "unreachable"},
            id="interrupted install, no SSH: the role refuses",
        ),
        pytest.param(
            record(pv.WIPED),
            pv.Observed("On", ssh=up()),
            [pv.STEP_POWER_OFF, pv.STEP_RELEASE, pv.STEP_DELETE_ISO],
            {"disk": DISK, "device": None, "via": None},
            id="wiped already",
        ),
        pytest.param(
            {"generation": 1, "phase": pv.PREPARING},
            pv.Observed("Off"),
            [pv.STEP_POWER_OFF, pv.STEP_RELEASE, pv.STEP_DELETE_ISO],
            {"disk": None, "device": None, "via": None},
            id="nothing installed: nothing wiped",
        ),
    ],
)
def test_plan_absent(rec: dict[str, Any], observed: pv.Observed, steps: list[str], wipe: dict[str, Any]) -> None:
    plan, planned = pv.plan_absent(rec, observed, cluster=CLUSTER)
    assert (plan.steps, planned) == (steps, wipe)


def test_teardown_refuses_a_node_of_another_cluster() -> None:
    with pytest.raises(ConflictError, match="belongs to cluster 'other'"):
        pv.plan_absent(record(pv.INSTALLED), pv.Observed("On", ssh=up(cluster="other")), cluster=CLUSTER)


@pytest.mark.parametrize(
    ("root_disk", "disks", "expected"),
    [
        ({"wwn": "naa.5000C500D5CDD26B"}, [{"path": "/dev/sda", "wwn": WWN}], "/dev/sda"),
        (
            {"serial": "WFK1"},
            [{"path": "/dev/sda", "serial": "OTHER"}, {"path": "/dev/sdb", "serial": "WFK1"}],
            "/dev/sdb",
        ),
        ({"wwn": WWN}, [], f"/dev/disk/by-id/wwn-{WWN}"),
        ({"serial": "WFK1"}, [{"path": "/dev/sda", "serial": "OTHER"}], ConflictError),
        ({"wwn": WWN}, [{"path": "/dev/sda", "wwn": WWN}, {"path": "/dev/sdb", "wwn": WWN}], ConflictError),
    ],
    ids=["wwn in another spelling", "serial", "wwn not listed", "serial not found", "ambiguous"],
)
def test_wipe_device(root_disk: dict[str, str], disks: list[dict[str, Any]], expected: Any) -> None:
    if isinstance(expected, type):
        with pytest.raises(expected):
            pv.wipe_device(root_disk, disks)
    else:
        assert pv.wipe_device(root_disk, disks) == expected


@pytest.mark.parametrize(
    ("facts", "root_disk", "problems"),
    [
        ({"virtual_media_available": True, "storage": [{"wwn": WWN}]}, DISK, []),
        ({"virtual_media_available": True, "storage": []}, DISK, []),
        ({"virtual_media_available": False, "storage": [{"wwn": WWN}]}, DISK, ["virtual media"]),
        ({"virtual_media_available": True, "storage": [{"wwn": "0x1111222233334444"}]}, DISK, ["root_disk"]),
        (
            {"virtual_media_available": True, "storage": [{"serial": "A"}, {"serial": "A"}]},
            {"serial": "A"},
            ["root_disk"],
        ),
    ],
    ids=["fits", "drives not reported", "iDRAC8 Express", "disk not there", "disk twice"],
)
def test_inventory_problems(facts: dict[str, Any], root_disk: dict[str, str], problems: list[str]) -> None:
    found = pv.inventory_problems(facts, root_disk)
    assert [p.split(":")[0] for p in found] == problems


@pytest.mark.parametrize(
    ("stdout", "marker", "paths"),
    [
        (
            '{"cluster": "r730", "generation": 1}\n\n---\n{"blockdevices": [{"path": "/dev/sda", "wwn": "0x5"}]}\n',
            {"cluster": "r730", "generation": 1},
            ["/dev/sda"],
        ),
        ("\n---\n", None, []),
        ("garbage\n---\nnot json", None, []),
    ],
    ids=["marker and disks", "no marker, no lsblk", "unreadable"],
)
def test_parse_probe_output(stdout: str, marker: dict[str, Any] | None, paths: list[str]) -> None:
    found_marker, disks = pv.parse_probe_output(stdout)
    assert found_marker == marker
    assert [d["path"] for d in disks] == paths


@pytest.mark.parametrize(
    ("marker", "matches"),
    [
        ({"cluster": CLUSTER, "generation": 1}, True),
        ({"cluster": CLUSTER, "generation": "1"}, True),
        ({"cluster": CLUSTER, "generation": 2}, False),
        ({"cluster": "other", "generation": 1}, False),
        ({"cluster": CLUSTER, "generation": "x"}, False),
        (None, False),
    ],
)
def test_marker_matches(marker: dict[str, Any] | None, matches: bool) -> None:
    assert pv.marker_matches(marker, CLUSTER, 1) is matches
