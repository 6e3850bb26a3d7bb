"""The baremetal_host role with ``provisioner: metal3`` against the lab's simulated Metal3 (lab.metal3).

What runs is the shipped role and modules (``metal3_host``, ``metal3_host_info``, the Redfish recovery modules),
through ansible-playbook, against Metal3's own BareMetalHost CRD served by the lab API, a controller that drives
the lab iDRAC8 over Redfish like Ironic does, and a simulated R730 that boots the written image with the config
drive the collection wrote. So the node answering SSH with its pinned key and marker proves the userData and
networkData Secrets say what cloud-init needs; the CRD's schema checks every object written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.metal.fleet import MetalFleet
from lab.metal.sandbox import SandboxUnavailable, probe
from lab.metal3 import contract as c
from lab.metal3.controller import Metal3Controller
from lab.modelplane.server import ModelplaneEmulator
from lab.redfish.personality import LAB_PASSWORD, LAB_USERNAME
from lab.redfish.server import BmcSpec, RedfishLab
from support.figures import record
from support.playbook import PlaybookRun, run_playbook, run_playbook_killed_when

NAMESPACE = "metal3"
CLUSTER = "lab-m3"
BMC = "r730-m3"
PLAYBOOK = [
    {
        "name": "Bare-metal clusters through Metal3",
        "hosts": "metal_clusters",
        "gather_facts": False,
        "roles": [
            {
                "role": "metalplane.inference.baremetal_host",
                "vars": {"baremetal_host_state": "{{ cluster_state }}"},
            }
        ],
    }
]
IMAGE = {
    "imageURL": "http://images.lab/CENTOS_10_NODE_IMAGE_K8S_v1.36.2.qcow2",
    "imageChecksum": "0" * 64,
    "imageChecksumType": "sha256",
    "imageDiskFormat": "qcow2",
}
RUN_TIMEOUT = 600
# The recovery run (about 70 s: Ironic's retries and the iDRAC's reset window) is in make test-metal.
FULL = os.environ.get("METALPLANE_METAL_FULL") == "1"
ROLE = "metalplane.inference.baremetal_host : "  # how the JSON report names a role's tasks
SIGKILLED = -9


@dataclass
class Lab:
    api: Any
    redfish: RedfishLab
    fleet: MetalFleet
    metal3: Metal3Controller
    tmp: Path
    inventory: Path
    kubeconfig: str

    def bmh(self) -> dict[str, Any]:
        found = self.api.get(c.API_VERSION, c.KIND, BMC, namespace=NAMESPACE)
        assert found is not None
        return found

    def state(self) -> str:
        """Metal3's provisioning state of the host; empty before the role registered it."""
        found = self.api.get(c.API_VERSION, c.KIND, BMC, namespace=NAMESPACE) or {}
        return str(((found.get("status") or {}).get("provisioning") or {}).get("state") or "")

    def installs(self) -> int:
        return len(self.fleet.host(BMC).log.installs)

    def site(self, state: str = "present", **extra: Any) -> PlaybookRun:
        env = {"TMPDIR": str(self.tmp)}
        return run_playbook(
            PLAYBOOK,
            inventory=self.inventory,
            extra_vars={"cluster_state": state, **extra},
            env=env,
            timeout=RUN_TIMEOUT,
        )

    def site_killed_in(self, metal3_state: str, state: str = "present") -> PlaybookRun:
        """The role's run SIGKILLed (with its module) while Metal3 holds the host in ``metal3_state``.

        The lab's controller holds the host there (Ironic busy writing the image or cleaning) until the run is
        dead, then goes on: as on real hardware, Metal3 finishes what the killed run asked for.
        """
        self.metal3.held.add(metal3_state)
        try:
            return run_playbook_killed_when(
                PLAYBOOK,
                lambda: self.state() == metal3_state,
                inventory=self.inventory,
                extra_vars={"cluster_state": state},
                env={"TMPDIR": str(self.tmp)},
                timeout=RUN_TIMEOUT,
            )
        finally:
            self.metal3.held.discard(metal3_state)


def write_inventory(tmp: Path, redfish: RedfishLab, fleet: MetalFleet, kubeconfig: str) -> Path:
    described = fleet.describe()
    host = described["hosts"][BMC]
    inventory = {
        "all": {
            "children": {
                "metal_clusters": {
                    "hosts": {
                        CLUSTER: {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                            "baremetal_host_provisioner": "metal3",
                            "baremetal_host_pool": "m3",
                            "baremetal_host_kubeconfig": kubeconfig,
                            "baremetal_host_requirements": {"gpu_model": "V100"},
                            "baremetal_host_node_ip": f"{host['ssh_address']}/{host['prefix']}",
                            "baremetal_host_gateway": host["gateway"],
                            "baremetal_host_dns": [host["gateway"]],
                            "baremetal_host_ssh_port": host["ssh_port"],
                            "baremetal_host_ssh_authorized_key": described["ssh_key"]["public_key"],
                            "baremetal_host_ssh_private_key_file": described["ssh_key"]["private_key_file"],
                            "baremetal_host_iso_dir": str(tmp / "keys"),
                            "baremetal_host_metal3_image": IMAGE,
                            "baremetal_host_install_timeout": 300,
                            "baremetal_host_boot_timeout": 120,
                            "baremetal_host_power_off_timeout": 60,
                        }
                    }
                },
                "pool_m3": {
                    "hosts": {
                        BMC: {
                            "bmc_url": redfish.url(BMC),
                            "bmc_username": LAB_USERNAME,
                            "bmc_password": LAB_PASSWORD,
                            "bmc_personality": "idrac8",
                            "bmc_ca_cert": redfish.ca_path,
                            "boot_mac": host["boot_mac"],
                            "root_disk": {"wwn": host["root_disk"]["wwn"]},
                            "host_facts": {"gpu_model": "Tesla V100-PCIE-16GB", "gpu_count": 2},
                        }
                    }
                },
            }
        }
    }
    path = tmp / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


# The tests share one lab, so they run cheapest on one worker, in order (the role's first run registers the
# BareMetalHost the later tests claim). The group asks pytest-xdist for that, but with pytest 9.2 and xdist 3.8 its
# loadgroup scheduling does not keep a group together (measured 2026-12-07: this module split over both workers), so
# no test relies on it: each one that needs the registered host asks for it (``registered``).
pytestmark = pytest.mark.xdist_group("metal3_provisioner_lab")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    try:
        probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"the host sandboxes cannot run here: {exc}")
    tmp = tmp_path_factory.mktemp("metal3-role")
    with (
        ModelplaneEmulator(delay_scale=0.0, extra_crds=(c.bmh_crd(),), publish_slices=False) as mp,
        RedfishLab([BmcSpec(name=BMC, personality="idrac8")], delay_scale=0.0, state_dir=tmp) as redfish,
        MetalFleet(redfish.states, tmp, 0.0) as fleet,
        Metal3Controller(mp.api, fleet, ca_path=redfish.ca_path, delay_scale=0.0) as metal3,
    ):
        mp.ensure_namespace(NAMESPACE)
        inventory = write_inventory(tmp, redfish, fleet, str(mp.kubeconfig_path))
        yield Lab(mp.api, redfish, fleet, metal3, tmp, inventory, str(mp.kubeconfig_path))
        assert not metal3.errors, metal3.errors


def ok(run: PlaybookRun) -> PlaybookRun:
    assert run.rc == 0, run.stdout[-6000:] + run.stderr[-3000:]
    return run


@pytest.fixture
def registered(lab: Lab) -> Lab:
    """The lab with the BareMetalHost the role registers, available and unclaimed: as test_up_again_and_down leaves
    it, or, on a worker where this module's tests ran out of order, after an up and a down of its own."""
    if lab.api.get(c.API_VERSION, c.KIND, BMC, namespace=NAMESPACE) is None:
        ok(lab.site())
        ok(lab.site("absent"))
    return lab


def test_up_again_and_down(lab: Lab) -> None:
    up = ok(lab.site())
    bmh = lab.bmh()
    assert bmh["status"]["provisioning"]["state"] == c.STATE_PROVISIONED
    assert bmh["spec"]["consumerRef"]["name"] == CLUSTER
    assert bmh["spec"]["bmc"]["address"].startswith("idrac-virtualmedia+https://")
    # the role logged in with the pinned key and read this claim's marker
    assert up.task(ROLE + "Check that the marker is this claim's", CLUSTER).get("failed") is not True
    assert lab.fleet.host(BMC).snapshot()["phase"] == "os-up"

    again = ok(lab.site())
    assert again.changed(CLUSTER) == 0, [t["task"]["name"] for p in again.report["plays"] for t in p["tasks"]
                                         if t["hosts"].get(CLUSTER, {}).get("changed")]  # fmt: skip

    ok(lab.site("absent"))
    bmh = lab.bmh()
    assert bmh["status"]["provisioning"]["state"] == c.STATE_AVAILABLE
    assert bmh["status"]["poweredOn"] is False
    assert "consumerRef" not in bmh["spec"]
    assert "image" not in bmh["spec"]
    assert lab.redfish.bmc(BMC).power_state == "Off"
    assert ok(lab.site("absent")).changed(CLUSTER) == 0


def test_a_run_killed_mid_provisioning_and_mid_cleaning_resumes(lab: Lab) -> None:
    installs = lab.installs()
    killed = lab.site_killed_in(c.STATE_PROVISIONING)
    assert killed.rc == SIGKILLED, killed.stdout[-3000:] + killed.stderr[-3000:]

    resumed = ok(lab.site())
    bmh = lab.bmh()
    assert bmh["status"]["provisioning"]["state"] == c.STATE_PROVISIONED
    assert bmh["spec"]["consumerRef"]["name"] == CLUSTER
    assert lab.installs() == installs + 1  # the resumed run waited for the killed run's install; none was added
    # the key pinned by the resumed run is the one the killed run wrote into the config drive
    assert resumed.task(ROLE + "Check that the marker is this claim's", CLUSTER).get("failed") is not True

    killed = lab.site_killed_in(c.STATE_DEPROVISIONING, "absent")
    assert killed.rc == SIGKILLED, killed.stdout[-3000:] + killed.stderr[-3000:]
    ok(lab.site("absent"))
    bmh = lab.bmh()
    assert bmh["status"]["provisioning"]["state"] == c.STATE_AVAILABLE
    assert bmh["status"]["poweredOn"] is False
    assert "consumerRef" not in bmh["spec"]
    assert lab.redfish.bmc(BMC).power_state == "Off"
    holders = [h for h in lab.api.list(c.API_VERSION, c.KIND, namespace=NAMESPACE) if h["spec"].get("consumerRef")]
    record(
        "kill_metal3",
        {
            "kills": 2,
            "converged": 2,
            "duplicates": lab.installs() - installs - 1,  # installs beyond the one the killed run started
            "orphans": len(holders),  # hosts still claimed after the down
            "double claims": 0,  # a BareMetalHost has one consumerRef: the resumed run asserted it is this cluster's
        },
        "the metal3 provisioner's role run SIGKILLed (process group) mid-provisioning and mid-cleaning, then run "
        "again: installs counted by the simulated host, claims as BareMetalHosts with a consumerRef",
    )


@pytest.mark.usefixtures("registered")
def test_host_claim_takes_and_releases_a_registered_bare_metal_host(lab: Lab) -> None:
    """host_claim's metal3 backend on the host the role registered: the consumerRef is the claim, nothing else."""
    described = lab.fleet.describe()["hosts"][BMC]
    claim = {
        "backend": "metal3",
        "kubeconfig": lab.kubeconfig,
        "namespace": NAMESPACE,
        "cluster": "other-m3",
        "pool": "m3",
        "hosts": [
            {
                "name": BMC,
                "bmc_url": lab.redfish.url(BMC),
                "username": LAB_USERNAME,
                "password": LAB_PASSWORD,
                "personality": "idrac8",
                "boot_mac": described["boot_mac"],
            }
        ],
    }
    tasks = [
        {"name": "claim", "metalplane.inference.host_claim": claim, "register": "claimed"},
        {"name": "again", "metalplane.inference.host_claim": claim},
        {"name": "release", "metalplane.inference.host_claim": {**claim, "state": "absent"}},
    ]
    assert lab.state() == c.STATE_AVAILABLE
    run = ok(run_playbook(tasks, env={"TMPDIR": str(lab.tmp)}))
    assert run.task("claim")["host"]["bare_metal_host"] == f"{NAMESPACE}/{BMC}"
    assert (run.task("claim")["changed"], run.task("again")["changed"]) == (True, False)
    assert run.task("release")["released"][0]["cluster"] == "other-m3"
    assert "consumerRef" not in lab.bmh()["spec"]
    assert LAB_PASSWORD not in run.stdout


@pytest.mark.usefixtures("registered")
def test_metal_preflight_plans_a_metal3_cluster_from_the_bare_metal_hosts(lab: Lab) -> None:
    """site.yml's preflight plans a metal3 cluster from the BareMetalHosts: the host the role would take."""
    described = lab.fleet.describe()
    host = described["hosts"][BMC]
    cluster = {
        "name": CLUSTER,
        "pool": "m3",
        "provisioner": "metal3",
        "requirements": {"gpu_model": "V100"},
        "node_ip": f"{host['ssh_address']}/{host['prefix']}",
        "gateway": host["gateway"],
        "dns": [host["gateway"]],
        "os_family": "el",
        "os_version": "10",
        "ssh_authorized_key": described["ssh_key"]["public_key"],
        "ssh_private_key_file": described["ssh_key"]["private_key_file"],
        "kubeadm_node_kubernetes_version": "v1.34.2",
        "nvidia_driver_installer_url": "https://us.download.nvidia.com/tesla/580.105.08/NVIDIA-Linux-x86_64-580.105.08.run",
        "nvidia_driver_installer_sha256": "0" * 64,
        "metal3": {"namespace": NAMESPACE, "image": IMAGE},
    }
    pool_host = {
        "name": BMC,
        "bmc_url": lab.redfish.url(BMC),
        "username": LAB_USERNAME,
        "password": LAB_PASSWORD,
        "personality": "idrac8",
        "boot_mac": host["boot_mac"],
        "facts": {"gpu_model": "Tesla V100-PCIE-16GB", "gpu_count": 2},
    }
    preflight = {
        "kubeconfig": lab.kubeconfig,
        "clusters": [cluster],
        "pools": [{"name": "m3", "hosts": [pool_host]}],
        "check_package_repositories": False,
    }
    tasks = [{"name": "preflight", "metalplane.inference.metal_preflight": preflight}]
    assert lab.state() == c.STATE_AVAILABLE
    planned = ok(run_playbook(tasks, env={"TMPDIR": str(lab.tmp)})).task("preflight")["clusters"][0]
    assert (planned["claim"], planned["bare_metal_host"], planned["lease"]) == ("new", f"{NAMESPACE}/{BMC}", None)
    assert "consumerRef" not in lab.bmh()["spec"]  # read-only

    bad = {
        **preflight,
        "clusters": [{**cluster, "metal3": {"namespace": NAMESPACE, "image": {"url": IMAGE["imageURL"]}}}],
    }
    failed = run_playbook(
        [{"name": "preflight", "metalplane.inference.metal_preflight": bad}], env={"TMPDIR": str(lab.tmp)}
    )
    assert failed.rc != 0
    problems = failed.task("preflight")["error"]["problems"]
    assert [p["field"] for p in problems] == ["clusters[0].metal3.image.checksum"]


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="runs with METALPLANE_METAL_FULL=1 (make test-metal)")
def test_a_virtual_media_failure_is_recovered_by_an_idrac_reset(lab: Lab) -> None:
    lab.redfish.bmc(BMC).inject("insert_vrm0021_until_reset")
    up = ok(lab.site())
    waited = up.task(ROLE + "Wait again for Metal3 (Ironic retries the step)", CLUSTER)
    assert waited["recovered_by"] == "bmc_reset"
    assert up.task(ROLE + "Reset the iDRAC (virtual media mount failed)", CLUSTER)["changed"] is True
    assert lab.bmh()["status"]["provisioning"]["state"] == c.STATE_PROVISIONED
    ok(lab.site("absent"))


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="runs with METALPLANE_METAL_FULL=1 (make test-metal)")
def test_a_lost_one_time_boot_is_recovered_by_the_boot_order(lab: Lab) -> None:
    """The R730's quirk: the one-time boot of the virtual CD loses to the OS on the disk, so every deploy boots that
    OS and Ironic times out waiting for the agent, until the role's cure puts the virtual CD first in the persistent
    order and restarts the server; Ironic's retry then boots the ramdisk from that order, the fault still armed."""
    bmc = lab.redfish.bmc(BMC)
    # An OS on the disk first: provisioned, then released without cleaning (the disk is not wiped).
    ok(lab.site(baremetal_host_metal3_automated_cleaning_mode="disabled"))
    ok(lab.site("absent"))
    assert lab.fleet.host(BMC).disk.installed is not None
    boots = len(bmc.boot_history)
    bmc.inject("one_time_boot_lost", count=10_000)  # every boot of this run: a cure must not depend on it expiring

    up = ok(lab.site())
    waited = up.task(ROLE + "Wait again for Metal3 (Ironic retries the step)", CLUSTER)
    assert waited["recovered_by"] == "boot_order"
    assert up.task(ROLE + "Put the virtual CD ahead of the disk in the persistent boot order", CLUSTER)["changed"]
    assert up.task(ROLE + "Restart the server into the deploy ramdisk", CLUSTER)["changed"]
    assert lab.bmh()["status"]["provisioning"]["state"] == c.STATE_PROVISIONED
    assert up.task(ROLE + "Check that the marker is this claim's", CLUSTER).get("failed") is not True
    this_run = bmc.boot_history[boots:]
    lost = [(b["device"], b["via"]) for b in this_run if b.get("one_time_boot_lost")]
    # Before the cure the old OS on the disk won; after it the ramdisk booted from the persistent order.
    assert lost[0] == ("Hdd", "order")
    assert ("VirtualCD", "order") in lost
    assert bmc.peek("one_time_boot_lost") is not None

    # The role has no Redfish cure on the way down (deprovision_metal3.yml): release with the fault gone.
    bmc.clear_faults()
    ok(lab.site("absent"))
    bmh = lab.bmh()
    assert bmh["status"]["provisioning"]["state"] == c.STATE_AVAILABLE
    assert "consumerRef" not in bmh["spec"]
