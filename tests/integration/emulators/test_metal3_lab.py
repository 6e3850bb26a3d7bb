"""The lab's simulated Metal3 drives BareMetalHosts through real lab BMCs and hosts (lab.metal3).

Every case writes plain Kubernetes objects (Secrets, a BareMetalHost) to the lab API that serves Metal3's own
CRD, and checks what Metal3 would report and what the BMC and the server went through: registration against the
BMC's credentials, inspection, provisioning through virtual media into an image whose cloud-init config drive
decides whether the host answers SSH (checked with the real OpenSSH client against a pinned host key),
deprovisioning, deletion, errors and their retries, and the CRD's schema refusing invalid objects with 422.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import asyncssh
import pytest

from lab.kube.api import ApiError
from lab.metal.fleet import MetalFleet
from lab.metal.sandbox import SandboxUnavailable, probe
from lab.metal3 import contract as c
from lab.metal3.controller import Metal3Controller
from lab.modelplane.server import ModelplaneEmulator
from lab.redfish.bmc import VIRTUAL_CD_DEVICE, BmcSpec
from lab.redfish.server import RedfishLab

WAIT = 60.0  # seconds; every transition is quick at delay scale 0, this only bounds a failure
SSH = "/usr/bin/ssh"
NAMESPACE = "metal3-lab"
CREDENTIALS = "bmc-credentials"
IMAGE = {"url": "http://images.lab/ubuntu-24.04.qcow2", "checksum": "http://images.lab/ubuntu-24.04.sha256sum",
         "checksumType": "sha256", "format": "qcow2"}  # fmt: skip
MARKER = "/etc/metal3-lab/marker"
# BMC name -> personality: one BMC (and host) per case, so cases do not share a server.
BMCS = {
    "r730-life": "idrac8",
    "gen-mac": "generic",
    "r740-hints": "idrac9",
    "r740-vmedia": "idrac9",
    "r730-bootonce": "idrac8",
    "r730-redfish": "idrac8",
    "gen-noaddr": "generic",
    "gen-reg": "generic",
    "gen-delete": "generic",
}


@dataclass
class Lab:
    api: Any
    bmcs: RedfishLab
    fleet: MetalFleet
    metal3: Metal3Controller
    tmp: Path
    client_key: Path

    def address(self, bmc: str, scheme: str = "") -> str:
        state = self.bmcs.bmc(bmc)
        scheme = scheme or ("idrac-virtualmedia+https" if state.p.dell else "redfish-virtualmedia+https")
        return f"{scheme}://127.0.0.1:{self.bmcs.port}/bmc/{bmc}/redfish/v1/Systems/{state.p.system_id}"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    try:
        probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"the host sandboxes cannot run here: {exc}")
    tmp = tmp_path_factory.mktemp("metal3")
    key = asyncssh.generate_private_key("ssh-ed25519")
    (tmp / "id").write_bytes(key.export_private_key())
    (tmp / "id").chmod(0o600)
    (tmp / "id.pub").write_bytes(key.export_public_key())
    specs = [BmcSpec(name=name, personality=personality) for name, personality in BMCS.items()]
    with (
        ModelplaneEmulator(delay_scale=0.0, extra_crds=(c.bmh_crd(),), publish_slices=False) as mp,
        RedfishLab(specs, delay_scale=0.0) as bmcs,
        MetalFleet(bmcs.states, tmp / "state", 0.0) as fleet,
        Metal3Controller(mp.api, fleet, ca_path=bmcs.ca_path, delay_scale=0.0) as metal3,
    ):
        mp.ensure_namespace(NAMESPACE)
        secret(mp.api, CREDENTIALS, {"username": "root", "password": "calvin"})
        yield Lab(mp.api, bmcs, fleet, metal3, tmp, tmp / "id")
        assert not metal3.errors, metal3.errors


# ---------------------------------------------------------------------------------------------- helpers
def secret(api: Any, name: str, data: dict[str, str]) -> None:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    api.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": NAMESPACE},
                "data": encoded})  # fmt: skip


def network_data(mac: str, address: str, gateway: str) -> str:
    """OpenStack network_data.json for one NIC with a static address and the default route."""
    return json.dumps(
        {
            "links": [{"id": "eno1", "type": "phy", "ethernet_mac_address": mac}],
            "networks": [
                {
                    "id": "provisioning",
                    "type": "ipv4",
                    "link": "eno1",
                    "ip_address": address,
                    "netmask": "255.255.255.0",
                    "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": gateway}],
                }
            ],
            "services": [{"type": "dns", "address": "127.77.0.1"}],
        }
    )


def host_network(lab: Lab, bmc: str, **changes: str) -> str:
    ident = lab.fleet.host(bmc).identity
    values = {"mac": ident.boot_mac, "address": ident.address, "gateway": ident.gateway, **changes}
    return network_data(values["mac"], values["address"], values["gateway"])


def bare_metal_host(lab: Lab, name: str, bmc: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "online": False,
        "bmc": {"address": lab.address(bmc), "credentialsName": CREDENTIALS},
        "bootMACAddress": lab.fleet.host(bmc).identity.boot_mac,
        "preprovisioningNetworkDataName": f"{name}-preprov",
        **spec,
    }
    return {"apiVersion": c.API_VERSION, "kind": c.KIND, "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": body}  # fmt: skip


def create_host(lab: Lab, name: str, bmc: str, **spec: Any) -> None:
    secret(lab.api, f"{name}-preprov", {c.NETWORK_DATA_KEY: host_network(lab, bmc)})
    lab.api.create(bare_metal_host(lab, name, bmc, **spec))


def state_of(bmh: dict[str, Any] | None) -> str | None:
    return None if bmh is None else ((bmh.get("status") or {}).get("provisioning") or {}).get("state")


def wait(lab: Lab, name: str, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    found = lab.metal3.wait_for(NAMESPACE, name, lambda b: b is not None and predicate(b), WAIT)
    assert found is not None
    return found


def in_state(state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda b: state_of(b) == state and b["status"]["operationalStatus"] == c.OPERATIONAL_OK


def in_error(error_type: str) -> Callable[[dict[str, Any]], bool]:
    return lambda b: (b.get("status") or {}).get("errorType") == error_type


def provision(lab: Lab, name: str, user_data: str, net: str, **spec: Any) -> None:
    secret(lab.api, f"{name}-user", {c.USER_DATA_KEY: user_data})
    secret(lab.api, f"{name}-net", {c.NETWORK_DATA_KEY: net})
    patch = {"image": IMAGE, "online": True, "userData": {"name": f"{name}-user"},
             "networkData": {"name": f"{name}-net"}, **spec}  # fmt: skip
    lab.api.patch(c.API_VERSION, c.KIND, name, {"spec": patch}, namespace=NAMESPACE)


def cloud_config(lab: Lab, hostname: str, host_key: asyncssh.SSHKey) -> str:
    return "#cloud-config\n" + json.dumps(
        {
            "hostname": hostname,
            "users": [{"name": "root", "ssh_authorized_keys": [(lab.tmp / "id.pub").read_text().strip()]}],
            "ssh_keys": {
                "ed25519_private": host_key.export_private_key().decode(),
                "ed25519_public": host_key.export_public_key().decode(),
            },
            "write_files": [{"path": MARKER, "content": f"provisioned by metal3 as {hostname}\n"}],
            "runcmd": ["echo ignored"],
        }
    )


def ssh(lab: Lab, bmc: str, command: str, key: asyncssh.SSHKey) -> subprocess.CompletedProcess[str]:
    ident = lab.fleet.host(bmc).identity
    known = lab.tmp / f"known_hosts-{bmc}"
    known.write_text(f"[{ident.address}]:{ident.port} {key.export_public_key().decode()}")
    options = ["BatchMode=yes", "IdentitiesOnly=yes", "ConnectTimeout=30", f"UserKnownHostsFile={known}"]
    options += ["StrictHostKeyChecking=yes", "GlobalKnownHostsFile=/dev/null"]
    argv = [SSH, "-i", str(lab.client_key), "-p", str(ident.port), *(a for o in options for a in ("-o", o))]
    return subprocess.run([*argv, f"root@{ident.address}", command], capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip


# ---------------------------------------------------------------------------------------------- cases
def test_register_inspect_provision_ssh_deprovision(lab: Lab) -> None:
    """The whole life of an R730 behind an iDRAC8 (idrac-virtualmedia), every step through the BMC."""
    create_host(lab, "life", "r730-life")
    bmh = wait(lab, "life", in_state(c.STATE_AVAILABLE))
    status = bmh["status"]
    host = lab.fleet.host("r730-life")
    assert status["goodCredentials"]["credentials"] == {"name": CREDENTIALS, "namespace": NAMESPACE}
    assert status["hardware"]["storage"][0]["serialNumber"] == host.identity.disk.serial
    assert status["hardware"]["nics"][0]["mac"] == host.identity.boot_mac
    assert set(status["operationHistory"]) == {"register", "inspect"}
    assert bmh["metadata"]["finalizers"] == [c.FINALIZER]
    assert status["poweredOn"] is False
    states = [t.state for t in lab.metal3.transitions[(NAMESPACE, "life")]]
    assert states[:3] == [c.STATE_REGISTERING, c.STATE_INSPECTING, c.STATE_AVAILABLE]
    bmc = lab.bmcs.bmc("r730-life")
    # Inspection cost one boot of the deploy ramdisk, from the virtual CD through Dell's one-time SCP boot.
    assert [b["device"] for b in bmc.boot_history] == ["VirtualCD"]
    assert bmc.counters["scp_import"] == 1

    key = asyncssh.generate_private_key("ssh-ed25519")
    hints = {"serialNumber": host.identity.disk.serial}
    provision(lab, "life", cloud_config(lab, "life-node", key), host_network(lab, "r730-life"), rootDeviceHints=hints)
    bmh = wait(lab, "life", in_state(c.STATE_PROVISIONED))
    assert bmh["status"]["provisioning"]["image"] == IMAGE
    assert bmh["status"]["provisioning"]["rootDeviceHints"] == hints
    assert bmh["status"]["poweredOn"] is True
    assert host.wait_for(lambda h: h.phase == "os-up", WAIT), (host.phase, host.reason)
    assert host.unreachable is None
    result = ssh(lab, "r730-life", f"cat {MARKER}; hostname", key)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["provisioned by metal3 as life-node", "life-node"]
    assert [b["device"] for b in bmc.boot_history] == ["VirtualCD", "VirtualCD", "Hdd"]
    assert not any(s["inserted"] for s in bmc.virtual_media.values())

    lab.api.patch(c.API_VERSION, c.KIND, "life", {"spec": {"image": None, "online": False}}, namespace=NAMESPACE)
    bmh = wait(
        lab, "life", lambda b: in_state(c.STATE_AVAILABLE)(b) and "deprovision" in b["status"]["operationHistory"]
    )
    assert bmh["status"]["poweredOn"] is False
    assert "image" not in bmh["status"]["provisioning"]
    assert bmc.power_state == "Off"
    assert host.disk.installed is None  # automatedCleaningMode metadata (the default) wiped the partition table


def test_a_wrong_mac_in_network_data_leaves_the_host_unreachable(lab: Lab) -> None:
    create_host(lab, "wrong-mac", "gen-mac", inspectionMode=c.INSPECTION_DISABLED)
    wait(lab, "wrong-mac", in_state(c.STATE_AVAILABLE))
    key = asyncssh.generate_private_key("ssh-ed25519")
    provision(lab, "wrong-mac", cloud_config(lab, "wrong", key), host_network(lab, "gen-mac", mac="f8:bc:12:00:00:01"))
    wait(lab, "wrong-mac", in_state(c.STATE_PROVISIONED))
    host = lab.fleet.host("gen-mac")
    assert host.wait_for(lambda h: h.phase == "os-up", WAIT), (host.phase, host.reason)
    assert host.unreachable is not None
    assert "no network configuration for the boot NIC" in host.unreachable
    assert ssh(lab, "gen-mac", "true", key).returncode != 0
    # Without inspection the ramdisk booted once, for the deploy; the generic BMC's one-time Cd override did it.
    assert [b["device"] for b in lab.bmcs.bmc("gen-mac").boot_history] == ["VirtualCD", "Hdd"]


def test_root_device_hints_that_match_no_disk_fail_provisioning(lab: Lab) -> None:
    create_host(lab, "hints", "r740-hints", inspectionMode=c.INSPECTION_DISABLED)
    wait(lab, "hints", in_state(c.STATE_AVAILABLE))
    key = asyncssh.generate_private_key("ssh-ed25519")
    hints = {"wwn": "0x5000c500deadbeef"}
    provision(lab, "hints", cloud_config(lab, "hints", key), host_network(lab, "r740-hints"), rootDeviceHints=hints)
    bmh = wait(lab, "hints", in_error(c.ERROR_PROVISIONING))
    status = bmh["status"]
    assert status["operationalStatus"] == c.OPERATIONAL_ERROR
    assert "No suitable device was found for deployment" in status["errorMessage"]
    assert state_of(bmh) == c.STATE_PROVISIONING
    assert status["provisioningFailCount"] >= 1
    assert lab.fleet.host("r740-hints").disk.installed is None
    # Fixing the hints lets the retry through.
    good = {"wwn": None, "deviceName": "/dev/sda"}  # a merge patch: null removes the bad hint
    lab.api.patch(c.API_VERSION, c.KIND, "hints", {"spec": {"rootDeviceHints": good}}, namespace=NAMESPACE)
    bmh = wait(lab, "hints", in_state(c.STATE_PROVISIONED))
    assert bmh["status"]["errorCount"] == 0
    assert bmh["status"]["provisioningFailCount"] == 0
    assert bmh["status"]["provisioning"]["rootDeviceHints"] == {"deviceName": "/dev/sda"}


def test_a_virtual_media_fault_is_an_error_retried_until_the_idrac_is_reset(lab: Lab) -> None:
    create_host(lab, "vmedia", "r740-vmedia", inspectionMode=c.INSPECTION_DISABLED)
    wait(lab, "vmedia", in_state(c.STATE_AVAILABLE))
    bmc = lab.bmcs.bmc("r740-vmedia")
    bmc.inject("insert_vrm0021_until_reset")
    key = asyncssh.generate_private_key("ssh-ed25519")
    provision(lab, "vmedia", cloud_config(lab, "vmedia", key), host_network(lab, "r740-vmedia"))
    bmh = wait(lab, "vmedia", lambda b: in_error(c.ERROR_PROVISIONING)(b) and b["status"]["errorCount"] >= 2)
    assert "Virtual media mount failed" in bmh["status"]["errorMessage"]
    assert "VRM0021" in bmh["status"]["errorMessage"]
    assert bmh["status"]["operationalStatus"] == c.OPERATIONAL_ERROR
    bmc.manager_reset()  # what an operator does for VRM0021: reset the iDRAC
    bmh = wait(lab, "vmedia", in_state(c.STATE_PROVISIONED))
    assert bmh["status"]["errorCount"] == 0
    errors = [t.error_count for t in lab.metal3.transitions[(NAMESPACE, "vmedia")] if t.error_type]
    assert errors == list(range(1, len(errors) + 1))  # each retry failed again and counted, until the reset


def virtual_cd_first(lab: Lab, bmc: str) -> None:
    """What the cure leaves on an iDRAC8: the virtual CD first in the persistent (BIOS) boot sequence."""
    state = lab.bmcs.bmc(bmc)
    with state.lock:
        sequence = sorted(state.boot_seq[state.seq_key()], key=lambda e: e["Index"])
        sequence.sort(key=lambda e: e["Name"] != VIRTUAL_CD_DEVICE)  # stable: the rest keep their order
        for index, entry in enumerate(sequence):
            entry["Index"] = index


def test_a_lost_one_time_boot_hangs_the_deploy_until_the_virtual_cd_is_first(lab: Lab) -> None:
    """The reference R730's quirk: the one-time boot of the virtual CD loses to the OS on the disk, the server
    boots that OS, the agent never calls back and Ironic's deploy times out, retry after retry, until the virtual
    CD goes first in the persistent order; the retry then boots the ramdisk from it, the fault still armed."""
    name, bmc_name = "bootonce", "r730-bootonce"
    create_host(lab, name, bmc_name, inspectionMode=c.INSPECTION_DISABLED)
    wait(lab, name, in_state(c.STATE_AVAILABLE))
    bmc, host = lab.bmcs.bmc(bmc_name), lab.fleet.host(bmc_name)
    bmc.inject("one_time_boot_lost", count=1000)
    # An empty disk: nothing for the one-time boot to lose to, so the first deploy goes through Dell's SCP boot.
    key = asyncssh.generate_private_key("ssh-ed25519")
    provision(
        lab, name, cloud_config(lab, name, key), host_network(lab, bmc_name), automatedCleaningMode=c.CLEANING_DISABLED
    )
    wait(lab, name, in_state(c.STATE_PROVISIONED))
    assert [(b["device"], b["via"]) for b in bmc.boot_history] == [("VirtualCD", "scp"), ("Hdd", "override")]
    assert bmc.counters["fault:one_time_boot_lost"] == 0
    # Deprovisioned without cleaning: the OS stays on the disk.
    lab.api.patch(c.API_VERSION, c.KIND, name, {"spec": {"image": None, "online": False}}, namespace=NAMESPACE)
    wait(lab, name, lambda b: in_state(c.STATE_AVAILABLE)(b) and "deprovision" in b["status"]["operationHistory"])
    assert host.disk.installed is not None

    again = {"image": IMAGE, "online": True, "automatedCleaningMode": c.CLEANING_METADATA}  # the Secrets stay
    lab.api.patch(c.API_VERSION, c.KIND, name, {"spec": again}, namespace=NAMESPACE)
    bmh = wait(lab, name, lambda b: in_error(c.ERROR_PROVISIONING)(b) and b["status"]["errorCount"] >= 2)
    assert "Timeout reached while waiting for callback for node" in bmh["status"]["errorMessage"]
    assert state_of(bmh) == c.STATE_PROVISIONING
    lost = [b for b in bmc.boot_history[2:] if b.get("one_time_boot_lost")]
    assert len(lost) >= 2
    assert {(b["device"], b["via"]) for b in lost} == {("Hdd", "order")}  # the old OS on the disk, every time
    assert host.wait_for(lambda h: h.phase in ("os-booting", "os-up"), WAIT), (host.phase, host.reason)

    virtual_cd_first(lab, bmc_name)
    bmh = wait(lab, name, in_state(c.STATE_PROVISIONED))
    assert bmh["status"]["errorCount"] == 0
    # The deploy that went through booted the ramdisk from the persistent order, its one-time boot lost again.
    agent_boot = [b for b in bmc.boot_history if b["device"] == "VirtualCD"][-1]
    assert (agent_boot["via"], agent_boot.get("one_time_boot_lost")) == ("order", True)
    assert bmc.peek("one_time_boot_lost") is not None
    bmc.clear_faults()


class Failure(NamedTuple):
    """A BareMetalHost Metal3 cannot use: its BMC, how it differs from a good one, the error it gets."""

    name: str
    bmc: str
    change: dict[str, Any]
    error_type: str
    message: str  # what errorMessage says


FAILURES = [
    Failure("wrong-password", "gen-reg", {"credentials": "wrong"}, c.ERROR_REGISTRATION, "HTTP 401"),
    Failure("no-secret", "gen-reg", {"credentials": "missing"}, c.ERROR_REGISTRATION, "not found"),
    Failure("unknown-scheme", "gen-reg", {"scheme": "ipmi"}, c.ERROR_REGISTRATION, "Unknown BMC type 'ipmi'"),
    Failure("redfish-on-dell", "r730-redfish", {"scheme": "redfish-virtualmedia+https"}, c.ERROR_INSPECTION,
            "use idrac-redfish-virtual-media"),
    Failure("no-ramdisk-address", "gen-noaddr", {"preprov": None}, c.ERROR_INSPECTION,
            "Timeout reached while waiting for callback"),
]  # fmt: skip


@pytest.mark.parametrize("case", FAILURES, ids=[f.name for f in FAILURES])
def test_a_host_metal3_cannot_use_reports_why(lab: Lab, case: Failure) -> None:
    name, bmc, change = case.name, case.bmc, case.change
    body = bare_metal_host(lab, name, bmc)
    if change.get("credentials") == "wrong":
        secret(lab.api, f"{name}-creds", {"username": "root", "password": "not-calvin"})
        body["spec"]["bmc"]["credentialsName"] = f"{name}-creds"
    elif change.get("credentials") == "missing":
        body["spec"]["bmc"]["credentialsName"] = f"{name}-creds"
    if "scheme" in change:
        body["spec"]["bmc"]["address"] = lab.address(bmc, change["scheme"])
    if "preprov" in change:
        del body["spec"]["preprovisioningNetworkDataName"]
    else:
        secret(lab.api, f"{name}-preprov", {c.NETWORK_DATA_KEY: host_network(lab, bmc)})
    lab.api.create(body)
    bmh = wait(lab, name, lambda b: in_error(case.error_type)(b) and b["status"]["errorCount"] >= 2)
    assert bmh["status"]["operationalStatus"] == c.OPERATIONAL_ERROR
    assert case.message in bmh["status"]["errorMessage"]
    wanted = c.STATE_REGISTERING if case.error_type == c.ERROR_REGISTRATION else c.STATE_INSPECTING
    assert state_of(bmh) == wanted


def test_deleting_powers_off_then_releases_the_finalizer(lab: Lab) -> None:
    create_host(lab, "doomed", "gen-delete", inspectionMode=c.INSPECTION_DISABLED, online=True)
    wait(lab, "doomed", lambda b: in_state(c.STATE_AVAILABLE)(b) and b["status"]["poweredOn"])
    assert lab.bmcs.bmc("gen-delete").power_state == "On"
    lab.api.delete(c.API_VERSION, c.KIND, "doomed", NAMESPACE)
    lab.metal3.wait_for(NAMESPACE, "doomed", lambda b: b is None, WAIT)
    states = [t.state for t in lab.metal3.transitions[(NAMESPACE, "doomed")]]
    assert states[-2:] == [c.STATE_POWERING_OFF_BEFORE_DELETE, c.STATE_DELETING]
    assert lab.bmcs.bmc("gen-delete").power_state == "Off"


# (what is wrong, how the spec differs from a valid one, the field the 422 names)
INVALID = [
    ("bootMACAddress not a MAC", {"bootMACAddress": "not-a-mac"}, "spec.bootMACAddress"),
    ("checksumType sha1", {"image": {"url": "http://x/i.qcow2", "checksum": "abc", "checksumType": "sha1"}},
     "spec.image.checksumType"),
    ("online missing", {"online": None}, "spec.online"),
    ("bmc without credentialsName", {"bmc": {"address": "redfish-virtualmedia://127.0.0.1/redfish/v1/Systems/1"}},
     "spec.bmc.credentialsName"),
    ("inspectionMode unknown", {"inspectionMode": "slow"}, "spec.inspectionMode"),
]  # fmt: skip


@pytest.mark.parametrize(("why", "change", "field"), INVALID, ids=[i[0] for i in INVALID])
def test_the_crd_schema_refuses_an_invalid_host(lab: Lab, why: str, change: dict[str, Any], field: str) -> None:
    body = bare_metal_host(lab, "invalid", "gen-reg")
    for key, value in change.items():
        if value is None:
            del body["spec"][key]
        else:
            body["spec"][key] = value
    with pytest.raises(ApiError) as caught:
        lab.api.create(body)
    assert caught.value.code == 422, why
    assert field in json.dumps(caught.value.details), caught.value.details
    assert lab.metal3.get(NAMESPACE, "invalid") is None


def test_the_served_schema_is_metal3s() -> None:
    """What the lab serves is upstream's CRD: the patterns and enums the 422 cases rely on are its own."""
    schema = c.bmh_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert schema["required"] == ["online"]
    assert schema["properties"]["bootMACAddress"]["pattern"] == "[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}"
    assert "sha1" not in schema["properties"]["image"]["properties"]["checksumType"]["enum"]
