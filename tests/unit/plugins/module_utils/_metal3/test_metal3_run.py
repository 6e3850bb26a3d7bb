"""metal3_host's run over an in-memory API server and a scripted Metal3: register, claim, provision, release."""

from __future__ import annotations

import json
from typing import Any

import pytest
from metal3_fakes import MemoryObjects, ScriptedMetal3

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ConflictError,
    InputError,
    NotFoundError,
)
from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import bmh as b
from ansible_collections.metalplane.inference.plugins.module_utils._metal3.run import (
    Metal3Failed,
    run_metal3_host,
    run_metal3_host_info,
)

SECRET = "bmc-s3cret"
SHA256 = "b" * 64
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHxL op@controller"


class Module:
    def __init__(self, params: dict[str, Any], *, check_mode: bool = False) -> None:
        self.params = params
        self.check_mode = check_mode
        self.warnings: list[str] = []
        self.secrets: set[str] = set()

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def require(self, _library: str, _traceback: str | None) -> None:
        return None

    def log_secret(self, value: str | None) -> None:
        if value:
            self.secrets.add(value)


def pool_host(name: str, mac: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "bmc_url": f"https://{name}.idrac.example",
        "username": "root",
        "password": SECRET,
        "personality": "idrac8",
        "boot_mac": mac,
        "root_disk": {"wwn": "0x5000c500a1b2c3d4"},
        **extra,
    }


def params(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kubeconfig": "/dev/null",
        "cluster": "dc1",
        "pool": "r730",
        "namespace": "metal3",
        "hosts": [pool_host("r730-b", "00:5c:52:31:3a:9d"), pool_host("r730-a", "00:5c:52:31:3a:9c")],
        "state": "present",
        "image": {"url": "http://images.example/node.qcow2", "checksum": SHA256, "disk_format": "qcow2"},
        "network": {"node_ip": "192.0.2.10/24", "gateway": "192.0.2.1", "dns": ["192.0.2.53"]},
        "ssh_authorized_key": KEY,
        "boot_mode": "UEFI",
        "automated_cleaning_mode": "metadata",
        "wait": True,
        "wait_timeout": 7200,
        "claimer": "op@controller",
    }
    base.update(overrides)
    return base


def run(
    store: MemoryObjects, metal3: ScriptedMetal3, *, check_mode: bool = False, **overrides: Any
) -> tuple[dict[str, Any], Module]:
    module = Module(params(**overrides), check_mode=check_mode)
    result = run_metal3_host(module, store_factory=lambda _p: store, clock=metal3.clock, sleep=metal3.sleep)
    return result, module


@pytest.fixture
def lab() -> tuple[MemoryObjects, ScriptedMetal3]:
    store = MemoryObjects()
    return store, ScriptedMetal3(store)


def test_present_registers_claims_the_first_host_by_name_and_provisions(lab: Any) -> None:
    store, metal3 = lab
    result, module = run(store, metal3)
    assert result["changed"] is True
    assert result["registered"] == ["r730-a", "r730-b"]
    host = result["host"]
    assert (host["name"], host["status"]["state"], host["generation"], host["owned"]) == (
        "r730-a",
        "provisioned",
        1,
        True,
    )
    obj = store.get(b.API_VERSION, b.KIND, "metal3", "r730-a")
    assert obj is not None
    spec = obj["spec"]
    assert spec["consumerRef"] == {
        "apiVersion": b.CONSUMER_API_VERSION,
        "kind": b.CONSUMER_KIND,
        "name": "dc1",
        "namespace": "metal3",
    }
    assert spec["image"] == {"url": "http://images.example/node.qcow2", "checksum": SHA256, "format": "qcow2"}
    assert spec["online"] is True
    assert spec["preprovisioningNetworkDataName"] == "r730-a-network-data"
    assert spec["networkData"] == {"name": "r730-a-network-data", "namespace": "metal3"}
    assert (
        spec["bmc"]["address"] == "idrac-virtualmedia+https://r730-a.idrac.example/redfish/v1/Systems/System.Embedded.1"
    )
    assert store.secret("r730-a-bmc-secret") == {"username": "root", "password": SECRET}
    user_data = store.secret("r730-a-user-data")
    assert host["ssh_host_public_key"] == user_data["sshHostKeyPublic"]
    assert user_data["sshHostKey"] in module.secrets  # masked in every later output
    network = json.loads(store.secret("r730-a-network-data")["networkData"])
    assert network["links"][0]["ethernet_mac_address"] == "00:5c:52:31:3a:9c"
    assert SECRET not in json.dumps(result)
    assert user_data["sshHostKey"] not in json.dumps(result)
    # the other host is registered, free, and untouched by the claim
    other = store.get(b.API_VERSION, b.KIND, "metal3", "r730-b")
    assert other is not None
    assert "consumerRef" not in other["spec"]


def test_a_second_run_changes_nothing_and_keeps_the_host_key(lab: Any) -> None:
    store, metal3 = lab
    first, _module = run(store, metal3)
    writes = len(store.writes)
    second, _module = run(store, metal3)
    assert second["changed"] is False, second["events"]
    assert len(store.writes) == writes
    assert second["host"]["ssh_host_public_key"] == first["host"]["ssh_host_public_key"]


def test_check_mode_writes_nothing(lab: Any) -> None:
    store, metal3 = lab
    result, _module = run(store, metal3, check_mode=True)
    assert result["changed"] is True
    assert result["registered"] == ["r730-a", "r730-b"]
    assert store.writes == []


def test_absent_deprovisions_waits_clean_and_off_then_releases(lab: Any) -> None:
    store, metal3 = lab
    run(store, metal3)
    result, _module = run(store, metal3, state="absent")
    assert result["changed"] is True
    assert result["released"] == ["r730-a"]
    obj = store.get(b.API_VERSION, b.KIND, "metal3", "r730-a")
    assert obj is not None
    assert "consumerRef" not in obj["spec"]
    assert "image" not in obj["spec"]
    assert obj["spec"]["online"] is False
    assert b.status_of(obj)["state"] == "available"
    assert b.status_of(obj)["powered_on"] is False
    assert b.CLUSTER_LABEL not in obj["metadata"]["labels"]
    assert store.get("v1", "Secret", "metal3", "r730-a-user-data") is None
    assert store.get("v1", "Secret", "metal3", "r730-a-bmc-secret") is not None  # registration stays
    again, _module = run(store, metal3, state="absent")
    assert again["changed"] is False


def test_absent_with_delete_host_deletes_only_hosts_it_registered(lab: Any) -> None:
    store, metal3 = lab
    theirs = b.Registration(
        name="r730-a",
        namespace="metal3",
        pool="r730",
        address="idrac-virtualmedia://x/redfish/v1/Systems/System.Embedded.1",
        boot_mac="00:5c:52:31:3a:9c",
        boot_mode="UEFI",
        disable_certificate_verification=True,
    ).host()
    theirs["metadata"]["labels"].pop(b.MANAGED_BY_LABEL)
    store.create(theirs)
    run(store, metal3)
    result, module = run(store, metal3, state="absent", delete_host=True)
    assert result["released"] == ["r730-a"]
    assert store.get(b.API_VERSION, b.KIND, "metal3", "r730-a") is not None
    assert "not registered by this collection" in module.warnings[0]


def test_another_consumer_holds_the_first_host(lab: Any) -> None:
    store, metal3 = lab
    run(store, metal3, cluster="other")
    result, _module = run(store, metal3)
    assert result["host"]["name"] == "r730-b"
    skipped = {s["name"]: s["reason"] for s in result["skipped_hosts"]}
    assert "held by MetalCluster metal3/other" in skipped["r730-a"]


def test_a_claim_that_loses_the_race_takes_the_next_host(lab: Any) -> None:
    store, metal3 = lab
    run(store, metal3, cluster="warmup")  # registers both and makes them available
    run(store, metal3, cluster="warmup", state="absent")

    def rival(body: dict[str, Any]) -> None:  # another controller claims r730-a between our read and our write
        current = store.get(b.API_VERSION, b.KIND, "metal3", body["metadata"]["name"])
        assert current is not None
        current["spec"]["consumerRef"] = {"kind": "Metal3Machine", "name": "capm3-m", "namespace": "metal3"}
        store.objects[("BareMetalHost", "metal3", "r730-a")] = {**current, "status": current.get("status")}
        store.objects[("BareMetalHost", "metal3", "r730-a")]["metadata"]["resourceVersion"] = "999"

    store.before_replace = rival
    result, _module = run(store, metal3)
    assert result["host"]["name"] == "r730-b"
    capm3 = store.get(b.API_VERSION, b.KIND, "metal3", "r730-a")
    assert capm3 is not None
    assert capm3["spec"]["consumerRef"]["kind"] == "Metal3Machine"


def test_no_free_host_names_every_reason(lab: Any) -> None:
    store, metal3 = lab
    run(store, metal3, cluster="one")
    run(store, metal3, cluster="two")
    with pytest.raises(NotFoundError) as caught:
        run(store, metal3, cluster="three")
    assert "r730-a: held by" in caught.value.msg
    assert "r730-b: held by" in caught.value.msg


def test_a_virtual_media_failure_fails_with_the_bmc_reset_hint(lab: Any) -> None:
    store, metal3 = lab
    run(store, metal3, cluster="warmup")
    run(store, metal3, cluster="warmup", state="absent")
    metal3.fail["r730-a"] = {
        "state": "provisioning",
        "operationalStatus": "error",
        "errorType": "provisioning error",
        "errorMessage": "Virtual media mount failed: the iDRAC answered 500",
        "errorCount": 2,
    }
    with pytest.raises(Metal3Failed) as caught:
        run(store, metal3)
    details = caught.value.to_result()
    assert details["recovery"] == "bmc_reset"
    assert details["status"]["error_message"].startswith("Virtual media mount failed")
    assert "provisioning" in caught.value.msg


def test_a_platform_host_with_the_pool_name_but_another_mac_fails_before_any_write(lab: Any) -> None:
    store, metal3 = lab
    theirs = b.Registration(
        name="r730-a",
        namespace="metal3",
        pool="r730",
        address="idrac-virtualmedia://x/redfish/v1/Systems/System.Embedded.1",
        boot_mac="00:5c:52:31:3a:00",
        boot_mode="UEFI",
        disable_certificate_verification=True,
    ).host()
    theirs["metadata"]["labels"].pop(b.MANAGED_BY_LABEL)
    store.create(theirs)
    writes = list(store.writes)
    with pytest.raises(ConflictError) as caught:
        run(store, metal3)
    assert caught.value.details["field"] == "hosts[1]"
    assert store.writes == writes


def test_a_provisioned_host_with_another_image_is_not_silently_kept(lab: Any) -> None:
    store, metal3 = lab
    run(store, metal3)
    with pytest.raises(ConflictError) as caught:
        run(store, metal3, image={"url": "http://images.example/v2.qcow2", "checksum": SHA256})
    assert "state absent" in caught.value.msg


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"image": {"url": "http://images.example/node.qcow2"}}, "image.checksum"),
        ({"image": {"url": "http://i/n.qcow2", "checksum": SHA256, "checksum_type": "crc32"}}, "image.checksum_type"),
        ({"image": {"url": "http://i/n.qcow2", "checksum": SHA256, "disk_format": "iso9660"}}, "image.disk_format"),
        ({"hosts": [pool_host("r730-a", "00:5c:52:31:3a")]}, "hosts[0].boot_mac"),
        ({"hosts": [pool_host("R730_A", "00:5c:52:31:3a:9c")]}, "hosts[0].name"),
        ({"hosts": [pool_host("r730-a", "00:5c:52:31:3a:9c", personality="generic")]}, "hosts[0].system_path"),
        ({"network": {"node_ip": "192.0.2.10/24"}}, "network.gateway"),
        ({"ssh_authorized_key": "AAAA"}, "ssh_authorized_key"),
        ({"state_timeouts": {"provisionning": 10}}, "state_timeouts.provisionning"),
        ({"cluster": "DC_1"}, "cluster"),
    ],
)
def test_bad_input_fails_before_any_call(overrides: dict[str, Any], field: str) -> None:
    def no_store(_params: Any) -> Any:
        raise AssertionError("the store was opened")

    module = Module(params(**overrides))
    with pytest.raises(InputError) as caught:
        run_metal3_host(module, store_factory=no_store)
    assert caught.value.field == field


def test_info_returns_the_held_host_and_its_pinned_key(lab: Any) -> None:
    store, metal3 = lab
    module = Module(params())
    assert run_metal3_host_info(module, store_factory=lambda _p: store)["host"] is None
    provisioned, _module = run(store, metal3)
    info = run_metal3_host_info(Module(params()), store_factory=lambda _p: store)
    assert info["changed"] is False
    assert info["host"]["name"] == "r730-a"
    assert info["host"]["ssh_host_public_key"] == provisioned["host"]["ssh_host_public_key"]
    assert info["host"]["status"]["state"] == "provisioned"
    run(store, metal3, state="absent")
    assert run_metal3_host_info(Module(params()), store_factory=lambda _p: store)["host"] is None


def test_present_after_an_interrupted_absent_provisions_again(lab: Any) -> None:
    store, metal3 = lab
    run(store, metal3)
    store.patch(b.API_VERSION, b.KIND, "metal3", "r730-a", b.DEPROVISION_PATCH)  # a teardown killed right here
    metal3.sleep(1)
    assert b.status_of(store.get(b.API_VERSION, b.KIND, "metal3", "r730-a") or {})["state"] == "deprovisioning"
    result, _module = run(store, metal3)
    assert (result["host"]["name"], result["host"]["status"]["state"]) == ("r730-a", "provisioned")
