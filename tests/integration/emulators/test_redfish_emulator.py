"""The Redfish BMC emulator (``lab.redfish.server``) driven by a real sushy client and raw HTTPS.

Why: the Redfish modules are only as well tested as the emulator is faithful. These tests pin the
behaviour the modules rely on, per personality: the sushy paths (service root under a path
prefix, power, boot override, virtual media, Dell OEM SCP import, Manager reset), the Dell-only
resources (BootSources pending settings + BIOS jobs), ETags, sessions, and every injectable fault.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import sushy
from sushy import auth as sushy_auth

import lab.redfish.server as lab_redfish
from lab.common.emulator import free_port, lab_command, lab_environment
from lab.common.registry import EMULATORS
from lab.redfish.server import BmcSpec, RedfishLab

PERSONALITIES = ("idrac8", "idrac9", "generic")
NAMES = {"idrac8": "r730-1", "idrac9": "r740-1", "generic": "gen-1"}
SYSTEM = {"idrac8": "System.Embedded.1", "idrac9": "System.Embedded.1", "generic": "1"}
MANAGER = {"idrac8": "iDRAC.Embedded.1", "idrac9": "iDRAC.Embedded.1", "generic": "1"}
REPO = Path(__file__).resolve().parents[3]


# ----------------------------------------------------------------------------------- helpers
class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def images() -> Iterator[dict[str, Any]]:
    """A local web server with ``boot.iso``; records the methods the BMC used to fetch it."""
    seen: list[str] = []

    class Handler(_Quiet):
        def do_HEAD(self) -> None:
            seen.append(f"HEAD {self.path}")
            super().do_HEAD()

        def do_GET(self) -> None:
            seen.append(f"GET {self.path}")
            if self.path == "/redirect.iso":
                self.send_response(302)
                self.send_header("Location", "/boot.iso")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            super().do_GET()

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "boot.iso").write_bytes(b"\0" * 2048)
        (Path(tmp) / "disk.img").write_bytes(b"\0" * 2048)
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=tmp))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        base = f"http://127.0.0.1:{server.server_port}"
        yield {"url": f"{base}/boot.iso", "img": f"{base}/disk.img", "base": base, "seen": seen}
        server.shutdown()
        server.server_close()


@pytest.fixture
def lab() -> Iterator[RedfishLab]:
    specs = [BmcSpec(name=NAMES[p], personality=p) for p in PERSONALITIES]
    with RedfishLab(bmcs=specs, delay_scale=0.0) as running:
        yield running


@contextlib.contextmanager
def client(lab: RedfishLab, name: str, **kwargs: Any) -> Iterator[sushy.Sushy]:
    """A sushy client on a session that is always closed (iDRAC8 has few sessions)."""
    with sushy_auth.SessionAuth("root", "calvin") as session:
        yield sushy.Sushy(
            **lab.sushy_args(name, own_port=kwargs.pop("own_port", False)),
            auth=session,
            verify=lab.ca_path,
            server_side_retries=kwargs.pop("retries", 2),
            server_side_retries_delay=0.01,
            **kwargs,
        )


def raw(lab: RedfishLab, name: str, method: str, path: str, **kwargs: Any) -> requests.Response:
    kwargs.setdefault("auth", ("root", "calvin"))
    kwargs.setdefault("timeout", 10)
    return requests.request(method, lab.url(name) + path, verify=lab.ca_path, **kwargs)


def system_of(root: sushy.Sushy) -> Any:
    return root.get_system_collection().get_members()[0]


def manager_of(root: sushy.Sushy) -> Any:
    return root.get_manager_collection().get_members()[0]


def slots(system: Any, manager: Any) -> list[Any]:
    """Systems-side virtual media first, then the Manager's (iDRAC9 6.00.02 moved it: ironic ``af0b9751d``)."""
    try:
        return list(system.virtual_media.get_members())
    except sushy.exceptions.MissingAttributeError:
        return list(manager.virtual_media.get_members())


def cd_slot(system: Any, manager: Any) -> Any:
    return next(v for v in slots(system, manager) if sushy.VirtualMediaType.CD in v.media_types)


def message_ids(exc: sushy.exceptions.HTTPError) -> list[str]:
    return [m["MessageId"] for m in exc.extended_info or []]


# ------------------------------------------------------------------- identity and layout
@pytest.mark.parametrize(
    ("personality", "model", "vm_side", "dell_links"),
    [
        ("idrac8", "13G Monolithic", "Managers", ["Jobs"]),
        ("idrac9", "14G Monolithic", "Systems", ["DellJobService", "DellLCService", "DelliDRACCardService", "Jobs"]),
        ("generic", "Contoso BMC 2", "Systems", None),
    ],
)
def test_sushy_walks_the_prefixed_tree(
    lab: RedfishLab, personality: str, model: str, vm_side: str, dell_links: list[str] | None
) -> None:
    name = NAMES[personality]
    with client(lab, name) as root:
        system, manager = system_of(root), manager_of(root)
        prefix = f"/bmc/{name}/redfish/v1"
        assert system.path == f"{prefix}/Systems/{SYSTEM[personality]}"
        assert manager.path == f"{prefix}/Managers/{MANAGER[personality]}"
        assert manager.model == model
        assert all(v.path.startswith(f"{prefix}/{vm_side}/") for v in slots(system, manager))
        assert len(system.ethernet_interfaces.get_members()) == 4
        assert all(len(e.mac_address.split(":")) == 6 for e in system.ethernet_interfaces.get_members())
        gpus = system.pcie_devices.get_members()
        assert [g.model for g in gpus] == ["Tesla V100-PCIE-16GB"] * 2
        assert system.bios.attributes["BootMode"] in ("Bios", "Uefi")
        links = manager.json["Links"].get("Oem", {}).get("Dell")
        assert (sorted(k for k in links if not k.startswith("@")) if links else None) == dell_links
        assert not links or links["@odata.type"].endswith(".DellOemLinks")
    # every request went to the prefixed paths: nothing was answered 404
    assert all(r.status != 404 for r in lab.bmc(name).requests)


@pytest.mark.parametrize(
    ("personality", "advertised", "only_answers", "generation"),
    [
        ("idrac8", False, "collection", None),  # ServiceRoot 1.0-era: no ProtocolFeaturesSupported
        ("idrac9", False, "collection", "14G Monolithic"),  # DellSystem.SystemGeneration (iDRAC9 has it)
        ("generic", True, "member", None),
    ],
)
def test_only_member_query_and_system_generation(
    lab: RedfishLab, personality: str, advertised: bool, only_answers: str, generation: str | None
) -> None:
    """DSP0266 ``?only``: one member -> that member, where the root advertises it; else ignored."""
    name = NAMES[personality]
    root = raw(lab, name, "GET", "/redfish/v1").json()
    assert bool((root.get("ProtocolFeaturesSupported") or {}).get("OnlyMemberQuery")) is advertised
    body = raw(lab, name, "GET", "/redfish/v1/Systems?only").json()
    system_path = f"/bmc/{name}/redfish/v1/Systems/{SYSTEM[personality]}"
    if only_answers == "member":
        assert (body["@odata.id"], "Members" in body) == (system_path, False)
        assert body["PowerState"] in ("On", "Off")
    else:
        assert [m["@odata.id"] for m in body["Members"]] == [system_path]
    system = raw(lab, name, "GET", f"/redfish/v1/Systems/{SYSTEM[personality]}").json()
    dell_system = (system.get("Oem") or {}).get("Dell", {}).get("DellSystem", {})
    assert dell_system.get("SystemGeneration") == generation


@pytest.mark.parametrize(("personality", "only"), [("generic", False), ("idrac8", True)])
def test_only_member_query_per_bmc_override(personality: str, *, only: bool) -> None:
    """``BmcSpec(only_member_query=...)`` turns ``?only`` off (or on) for one BMC, root included."""
    spec = BmcSpec(name="bmc-1", personality=personality, only_member_query=only)
    with RedfishLab(bmcs=[spec], delay_scale=0.0) as rlab:
        root = raw(rlab, "bmc-1", "GET", "/redfish/v1").json()
        assert bool((root.get("ProtocolFeaturesSupported") or {}).get("OnlyMemberQuery")) is only
        body = raw(rlab, "bmc-1", "GET", "/redfish/v1/Systems?only").json()
        assert ("Members" not in body) is only


def test_tls_needs_the_lab_ca(lab: RedfishLab) -> None:
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(lab.url("gen-1") + "/redfish/v1", timeout=5)  # system CAs only
    assert requests.get(lab.url("gen-1") + "/redfish/v1", verify=lab.ca_path, timeout=5).status_code == 200
    assert Path(lab.ca_path).read_text().startswith("-----BEGIN CERTIFICATE-----")


def test_unknown_bmc_and_resource_are_404(lab: RedfishLab) -> None:
    url = f"https://127.0.0.1:{lab.port}/bmc/nope/redfish/v1"
    assert requests.get(url, verify=lab.ca_path, timeout=5).status_code == 404
    response = raw(lab, "r730-1", "GET", "/redfish/v1/Systems/1")
    assert response.status_code == 404
    assert response.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"].endswith("ResourceNotFound")


# ---------------------------------------------------------------------------------- power
@pytest.mark.parametrize(
    ("personality", "allowed"),
    [
        ("idrac8", {"On", "ForceOff", "GracefulRestart", "PushPowerButton", "Nmi"}),
        (
            "idrac9",
            {
                "On",
                "ForceOff",
                "ForceRestart",
                "GracefulRestart",
                "GracefulShutdown",
                "PushPowerButton",
                "Nmi",
                "PowerCycle",
            },
        ),
        (
            "generic",
            {
                "On",
                "ForceOff",
                "ForceRestart",
                "GracefulRestart",
                "GracefulShutdown",
                "PushPowerButton",
                "Nmi",
                "PowerCycle",
                "ForceOn",
            },
        ),
    ],
)
def test_power_transitions_take_time(personality: str, allowed: set[str]) -> None:
    spec = BmcSpec(name="b", personality=personality, power_delay=1.5)  # long enough for a loaded CI
    with RedfishLab(bmcs=[spec], delay_scale=1.0) as slow, client(slow, "b") as root:
        system = system_of(root)
        assert {v.value for v in system.get_allowed_reset_system_values()} == allowed
        assert system.power_state == sushy.PowerState.OFF
        system.reset_system(sushy.ResetType.ON)
        system.refresh()
        assert system.power_state == sushy.PowerState.POWERING_ON
        deadline = time.monotonic() + 5
        while system.power_state != sushy.PowerState.ON and time.monotonic() < deadline:
            time.sleep(0.1)
            system.refresh()
        assert system.power_state == sushy.PowerState.ON
        assert slow.bmc("b").boot["history"][-1]["via"] == "order"  # a power-on is a boot
        system.reset_system(sushy.ResetType.FORCE_OFF)
        system.refresh()
        assert system.power_state == sushy.PowerState.POWERING_OFF
        while system.power_state != sushy.PowerState.OFF and time.monotonic() < deadline + 5:
            time.sleep(0.1)
            system.refresh()
        assert system.power_state == sushy.PowerState.OFF


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_reset_type_outside_allowable_values_is_refused(lab: RedfishLab, personality: str) -> None:
    name = NAMES[personality]
    path = f"/redfish/v1/Systems/{SYSTEM[personality]}/Actions/ComputerSystem.Reset"
    response = raw(lab, name, "POST", path, json={"ResetType": "Bogus"})
    assert response.status_code == 400
    if personality == "idrac8":  # no ForceRestart on 13G
        assert raw(lab, name, "POST", path, json={"ResetType": "ForceRestart"}).status_code == 400
    assert lab.bmc(name).power_state == "Off"


@pytest.mark.parametrize(("personality", "status"), [("idrac8", 409), ("idrac9", 409), ("generic", 204)])
def test_power_on_when_on(lab: RedfishLab, personality: str, status: int) -> None:
    name = NAMES[personality]
    path = f"/redfish/v1/Systems/{SYSTEM[personality]}/Actions/ComputerSystem.Reset"
    assert raw(lab, name, "POST", path, json={"ResetType": "On"}).status_code == 204
    assert raw(lab, name, "POST", path, json={"ResetType": "On"}).status_code == status


# ---------------------------------------------------------------------------- boot override
@pytest.mark.parametrize("personality", PERSONALITIES)
def test_one_time_pxe_is_consumed_by_the_next_boot(lab: RedfishLab, personality: str) -> None:
    name = NAMES[personality]
    with client(lab, name) as root:
        system = system_of(root)
        assert sushy.BootSource.PXE in system.get_allowed_system_boot_source_values()
        system.set_system_boot_options(target=sushy.BootSource.PXE, enabled=sushy.BootSourceOverrideEnabled.ONCE)
        system.refresh()
        assert (system.boot.target, system.boot.enabled) == (sushy.BootSource.PXE, sushy.BootSourceOverrideEnabled.ONCE)
        lab.bmc(name).reboot()
        system.refresh()
        assert system.boot.enabled == sushy.BootSourceOverrideEnabled.DISABLED
    assert lab.bmc(name).boot["history"][-1] == {
        "device": "Pxe",
        "via": "override",
        "mode": lab.bmc(name).bios["BootMode"],
    }


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_unknown_boot_target_is_refused(lab: RedfishLab, personality: str) -> None:
    name = NAMES[personality]
    body = {"Boot": {"BootSourceOverrideTarget": "Tape"}}
    response = raw(lab, name, "PATCH", f"/redfish/v1/Systems/{SYSTEM[personality]}", json=body)
    assert response.status_code == 400
    assert lab.bmc(name).boot["target"] == "None"


@pytest.mark.parametrize(("personality", "device"), [("idrac8", "PhysicalCD"), ("idrac9", "VirtualCD")])
def test_cd_override_boots_the_physical_drive_on_idrac8(
    lab: RedfishLab, images: dict[str, Any], personality: str, device: str
) -> None:
    name = NAMES[personality]
    with client(lab, name) as root:
        system, manager = system_of(root), manager_of(root)
        cd_slot(system, manager).insert_media(images["url"])
        system.set_system_boot_options(target=sushy.BootSource.CD, enabled=sushy.BootSourceOverrideEnabled.ONCE)
    lab.bmc(name).reboot()
    assert lab.bmc(name).boot["history"][-1]["device"] == device


def test_idrac8_override_mode_is_read_only(lab: RedfishLab) -> None:
    path = "/redfish/v1/Systems/System.Embedded.1"
    same = raw(lab, "r730-1", "PATCH", path, json={"Boot": {"BootSourceOverrideMode": "Legacy"}})
    assert same.status_code == 200
    other = raw(lab, "r730-1", "PATCH", path, json={"Boot": {"BootSourceOverrideMode": "UEFI"}})
    assert other.status_code == 400
    assert lab.bmc("r730-1").bios["BootMode"] == "Bios"


def test_idrac9_every_mode_patch_queues_a_bios_job(lab: RedfishLab) -> None:
    path = "/redfish/v1/Systems/System.Embedded.1"
    response = raw(lab, "r740-1", "PATCH", path, json={"Boot": {"BootSourceOverrideMode": "UEFI"}})  # unchanged
    assert response.status_code == 200
    assert "/Managers/iDRAC.Embedded.1/Jobs/JID_" in response.headers["Location"]
    assert [j["JobState"] for j in lab.bmc("r740-1").jobs.values()] == ["Scheduled"]
    lab.bmc("r740-1").reboot()
    assert [j["JobState"] for j in lab.bmc("r740-1").jobs.values()] == ["Completed"]


# --------------------------------------------------------------------- persistent boot order
@pytest.mark.parametrize("personality", ["idrac8", "idrac9"])
def test_boot_sources_pending_then_job_then_reboot(lab: RedfishLab, personality: str) -> None:
    """Dell's iDRAC8 boot order: PATCH BootSources/Settings, POST Jobs with TargetSettingsURI, reboot."""
    name = NAMES[personality]
    state = lab.bmc(name)
    with client(lab, name) as root:
        system = system_of(root)
        seq_key = "UefiBootSeq" if system.bios.attributes["BootMode"] == "Uefi" else "BootSeq"
        current = root._conn.get(system.path + "/BootSources").json()["Attributes"][seq_key]
        wanted = [current[1], current[0], *current[2:]]
        for index, entry in enumerate(wanted):
            entry["Index"] = index
        root._conn.patch(system.path + "/BootSources/Settings", data={"Attributes": {seq_key: wanted}})
        pending = root._conn.get(system.path + "/BootSources/Settings").json()["Attributes"][seq_key]
        assert [e["Name"] for e in pending] == [e["Name"] for e in wanted]
        assert state.boot["boot_seq"] == [e["Name"] for e in current]  # not applied yet
        jobs_uri = manager_of(root).path + "/Jobs"
        response = root._conn.post(jobs_uri, data={"TargetSettingsURI": system.path + "/Bios/Settings"})
        jid = response.headers["Location"].rsplit("/", 1)[-1]
        assert response.headers["Location"].startswith(f"/bmc/{name}/redfish/v1/Managers/")
        assert root._conn.get(f"{jobs_uri}/{jid}").json()["JobState"] == "Scheduled"
        state.reboot()
        assert root._conn.get(f"{jobs_uri}/{jid}").json()["JobState"] == "Completed"
        applied = root._conn.get(system.path + "/BootSources").json()["Attributes"][seq_key]
        assert [e["Name"] for e in applied] == [e["Name"] for e in wanted]
        dell = manager_of(root).get_oem_extension("Dell")
        assert [j.job_state for j in dell.job_collection.get_jobs()] == ["Completed"]  # $expand works


def test_bios_job_needs_pending_changes_and_is_unique(lab: RedfishLab) -> None:
    jobs = "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs"
    target = {"TargetSettingsURI": "/redfish/v1/Systems/System.Embedded.1/Bios/Settings"}
    assert raw(lab, "r730-1", "POST", jobs, json=target).status_code == 400  # nothing pending
    attrs = {"Attributes": {"BootMode": "Uefi"}}
    assert raw(lab, "r730-1", "PATCH", "/redfish/v1/Systems/System.Embedded.1/Bios/Settings", json=attrs).ok
    assert raw(lab, "r730-1", "POST", jobs, json=target).status_code == 200
    again = raw(lab, "r730-1", "POST", jobs, json=target)
    assert again.status_code == 400
    assert "already exists" in again.json()["error"]["@Message.ExtendedInfo"][0]["Message"]
    lab.bmc("r730-1").reboot()
    assert lab.bmc("r730-1").bios["BootMode"] == "Uefi"


@pytest.mark.parametrize(("personality", "pending"), [("idrac9", True), ("generic", False)])
def test_boot_order_patch_with_etags(lab: RedfishLab, personality: str, pending: bool) -> None:
    name = NAMES[personality]
    path = f"/redfish/v1/Systems/{SYSTEM[personality]}"
    first = raw(lab, name, "GET", path)
    etag = first.headers["ETag"]
    order = first.json()["Boot"]["BootOrder"]
    new_order = [order[1], order[0], order[2]]
    ok = raw(lab, name, "PATCH", path, json={"Boot": {"BootOrder": new_order}}, headers={"If-Match": etag})
    assert ok.status_code == 200
    stale = raw(lab, name, "PATCH", path, json={"Boot": {"BootOrder": order}}, headers={"If-Match": etag})
    if pending:  # the order waits for the next boot, so the resource (and its ETag) did not change yet
        assert stale.status_code == 200
        lab.bmc(name).reboot()
        stale = raw(lab, name, "PATCH", path, json={"Boot": {"BootOrder": order}}, headers={"If-Match": etag})
    assert stale.status_code == 412
    assert stale.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"].endswith("PreconditionFailed")
    # sushy's connector sends If-Match and survives a 412 by retrying (``sushy/connector.py::_etag_handler``)
    with client(lab, name) as root:
        system = system_of(root)
        root._conn.patch(system.path, data={"Boot": {"BootOrder": order}}, etag=system._get_etag())
    lab.bmc(name).reboot()
    assert lab.bmc(name).boot["order"] == order
    incomplete = raw(lab, name, "PATCH", path, json={"Boot": {"BootOrder": order[:2]}})
    assert incomplete.status_code == 400


@pytest.mark.parametrize(
    ("personality", "apply_time", "jobs"),
    [
        ("idrac8", None, 0),
        ("idrac9", sushy.ApplyTime.ON_RESET, 1),
        ("generic", sushy.ApplyTime.ON_RESET, 0),
    ],
)
def test_bios_pending_attributes_via_sushy(lab: RedfishLab, personality: str, apply_time: Any, jobs: int) -> None:
    """``bios.set_attributes`` PATCHes the SettingsObject; Dell 14G+ makes a job of OnReset (community.general)."""
    name = NAMES[personality]
    state = lab.bmc(name)
    wanted = "Bios" if state.bios["BootMode"] == "Uefi" else "Uefi"
    with client(lab, name) as root:
        bios = system_of(root).bios
        bios.set_attributes({"BootMode": wanted}, apply_time=apply_time)
        bios.refresh()
        assert bios.pending_attributes == {"BootMode": wanted}
        assert bios.attributes["BootMode"] != wanted
    assert len(state.jobs) == jobs
    if personality == "idrac8":  # 13G: nothing happens without an explicit job
        state.reboot()
        assert state.bios["BootMode"] != wanted
        job = {"TargetSettingsURI": "/redfish/v1/Systems/System.Embedded.1/Bios/Settings"}
        assert raw(lab, name, "POST", "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs", json=job).status_code == 200
    state.reboot()
    assert state.bios["BootMode"] == wanted
    assert state.boot["mode"] == ("UEFI" if wanted == "Uefi" else "Legacy")


def test_idrac8_has_no_boot_order_property(lab: RedfishLab) -> None:
    path = "/redfish/v1/Systems/System.Embedded.1"
    assert "BootOrder" not in raw(lab, "r730-1", "GET", path).json()["Boot"]
    response = raw(lab, "r730-1", "PATCH", path, json={"Boot": {"BootOrder": ["Boot0001"]}})
    assert response.status_code == 400
    assert "ETag" not in raw(lab, "r730-1", "GET", path).headers


def test_boot_order_reverts_after_reboot_once(lab: RedfishLab) -> None:
    state = lab.bmc("r730-1")
    state.inject("boot_order_reverts", count=1)
    original = state.boot["boot_seq"]

    def apply(order: list[str]) -> None:
        entries = [{"Name": n, "Index": i, "Enabled": True} for i, n in enumerate(order)]
        base = "/redfish/v1/Systems/System.Embedded.1"
        assert raw(lab, "r730-1", "PATCH", base + "/BootSources/Settings", json={"Attributes": {"BootSeq": entries}}).ok
        job = {"TargetSettingsURI": base + "/Bios/Settings"}
        assert raw(lab, "r730-1", "POST", "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs", json=job).ok
        state.reboot()

    wanted = [original[1], original[0], *original[2:]]
    apply(wanted)
    assert state.boot["boot_seq"] == original  # the BMC reverted it
    assert state.counters["boot_order_reverted"] == 1
    apply(wanted)
    assert state.boot["boot_seq"] == wanted  # the fault fired once
    state.reboot()
    assert state.boot["boot_seq"] == wanted


# --------------------------------------------------------------------------- virtual media
@pytest.mark.parametrize("personality", PERSONALITIES)
def test_insert_fetches_the_image_then_eject(lab: RedfishLab, images: dict[str, Any], personality: str) -> None:
    name = NAMES[personality]
    images["seen"].clear()
    with client(lab, name) as root:
        system, manager = system_of(root), manager_of(root)
        cd = cd_slot(system, manager)
        cd.insert_media(images["url"], inserted=True, write_protected=True)
        cd.refresh(force=True)
        assert (cd.inserted, cd.image, cd.image_name, cd.write_protected) == (True, images["url"], "boot.iso", True)
        assert cd.connected_via == sushy.ConnectedVia.URI
        assert images["seen"] == ["HEAD /boot.iso"]
        cd.eject_media()
        cd.refresh(force=True)
        assert (cd.inserted, cd.image) == (False, None)
    assert lab.bmc(name).counters["insert_media"] == 1
    assert lab.bmc(name).counters["eject_media"] == 1


@pytest.mark.parametrize(
    ("personality", "status", "message"),
    [
        ("idrac8", 400, "IDRAC.1.6.RAC0904"),
        ("idrac9", 400, "IDRAC.2.8.RAC0904"),
        ("generic", 500, "Base.1.16.InternalError"),
    ],
)
def test_unreachable_image(lab: RedfishLab, personality: str, status: int, message: str) -> None:
    name = NAMES[personality]
    url = f"http://127.0.0.1:{free_port()}/boot.iso"
    with client(lab, name) as root:
        system, manager = system_of(root), manager_of(root)
        cd = cd_slot(system, manager)
        with pytest.raises(sushy.exceptions.HTTPError) as caught:
            cd.insert_media(url)
        assert caught.value.status_code == status
        assert message_ids(caught.value) == [message]
        cd.refresh(force=True)
        assert cd.inserted is False


def test_redirect_counts_as_unreachable(lab: RedfishLab, images: dict[str, Any]) -> None:
    path = "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD/Actions/VirtualMedia.InsertMedia"
    response = raw(lab, "r730-1", "POST", path, json={"Image": images["base"] + "/redirect.iso"})
    assert response.status_code == 400
    assert response.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "IDRAC.1.6.RAC0904"


@pytest.mark.parametrize("image", ["ftp://host/boot.iso", "boot.iso", ""])
def test_bad_image_url_is_refused_without_a_fetch(lab: RedfishLab, image: str) -> None:
    path = "/redfish/v1/Systems/1/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"
    fetches = lab.bmc("gen-1").counters["image_fetch"]
    assert raw(lab, "gen-1", "POST", path, json={"Image": image}).status_code == 400
    assert lab.bmc("gen-1").counters["image_fetch"] == fetches


def test_idrac8_one_image_at_a_time(lab: RedfishLab, images: dict[str, Any]) -> None:
    base = "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia"
    insert = "/Actions/VirtualMedia.InsertMedia"
    assert raw(lab, "r730-1", "POST", f"{base}/CD{insert}", json={"Image": images["url"]}).status_code == 204
    same = raw(lab, "r730-1", "POST", f"{base}/CD{insert}", json={"Image": images["url"]})
    other = raw(lab, "r730-1", "POST", f"{base}/RemovableDisk{insert}", json={"Image": images["img"]})
    assert (same.status_code, other.status_code) == (400, 400)
    assert same.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "IDRAC.1.6.VRM0012"
    assert other.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "IDRAC.1.6.VRM0021"


# ------------------------------------------------------------------------------ Dell OEM
@pytest.mark.parametrize("personality", ["idrac8", "idrac9"])
def test_scp_one_time_virtual_cd_boot_via_sushy_dell_oem(
    lab: RedfishLab, images: dict[str, Any], personality: str
) -> None:
    name = NAMES[personality]
    with client(lab, name) as root:
        system, manager = system_of(root), manager_of(root)
        cd_slot(system, manager).insert_media(images["url"])
        dell = manager.get_oem_extension("Dell")
        assert dell.import_system_configuration_uri.endswith("/Actions/Oem/EID_674_Manager.ImportSystemConfiguration")
        response = dell.set_virtual_boot_device(
            sushy.VIRTUAL_MEDIA_CD, persistent=False, manager=manager, system=system
        )
        assert response.status_code == 200
        assert response.json()["TaskState"] == "Completed"
    state = lab.bmc(name)
    assert state.scp_imports[0]["target"] == ["ALL"]  # sushy >= 5.7 sends a list
    assert state.boot["scp_boot"] == {"BootOnce": "Enabled", "FirstBootDevice": "VCD-DVD"}
    state.reboot()
    assert state.boot["history"][-1]["device"] == "VirtualCD"
    assert state.boot["history"][-1]["via"] == "scp"
    state.reboot()  # one-time: consumed
    assert state.boot["history"][-1]["via"] == "order"


def test_scp_import_through_sushy_task_monitor() -> None:
    spec = BmcSpec(name="slow", personality="idrac8", task_delay=1.5)
    with RedfishLab(bmcs=[spec], delay_scale=1.0) as rlab, client(rlab, "slow") as root:
        dell = manager_of(root).get_oem_extension("Dell")
        xml = (
            '<SystemConfiguration><Component FQDD="iDRAC.Embedded.1">'
            '<Attribute Name="ServerBoot.1#BootOnce">Enabled</Attribute>'
            '<Attribute Name="ServerBoot.1#FirstBootDevice">VCD-DVD</Attribute></Component></SystemConfiguration>'
        )
        monitor = dell.import_system_configuration(xml)
        assert monitor.is_processing  # 202 without a body, as the POST answered
        assert monitor.check_is_processing  # GET Tasks/JID_...: 202 with the Task
        assert monitor.task.task_state == sushy.TaskState.RUNNING
        deadline = time.monotonic() + 5
        while monitor.check_is_processing and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not monitor.is_processing
        assert monitor.get_task().task_state == sushy.TaskState.COMPLETED
        assert rlab.bmc("slow").scp_imports[0]["shutdown_type"] == "NoReboot"


def test_scp_import_errors(lab: RedfishLab) -> None:
    uri = "/redfish/v1/Managers/iDRAC.Embedded.1/Actions/Oem/EID_674_Manager.ImportSystemConfiguration"
    xml = '<SystemConfiguration><Component FQDD="iDRAC.Embedded.1"></Component></SystemConfiguration>'
    assert (
        raw(lab, "r730-1", "POST", uri, json={"ShareParameters": {"Target": "ALL"}, "ImportBuffer": "<x"}).status_code
        == 400
    )
    lab.bmc("r730-1").inject("scp_job_running")
    busy = raw(lab, "r730-1", "POST", uri, json={"ShareParameters": {"Target": "ALL"}, "ImportBuffer": xml})
    assert busy.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "IDRAC.1.6.RAC0679"
    accepted = raw(lab, "r730-1", "POST", uri, json={"ShareParameters": {"Target": "ALL"}, "ImportBuffer": xml})
    assert accepted.status_code == 202
    assert accepted.headers["Location"].startswith("/bmc/r730-1/redfish/v1/TaskService/Tasks/JID_")


def test_idrac8_lacks_dell_services(lab: RedfishLab) -> None:
    with client(lab, "r730-1") as root:
        dell = manager_of(root).get_oem_extension("Dell")
        with pytest.raises(sushy.exceptions.MissingAttributeError):
            dell.reset_idrac()
        with pytest.raises(sushy.exceptions.MissingAttributeError):
            dell.job_service.delete_jobs()
        with pytest.raises(sushy.exceptions.MissingAttributeError):
            dell.lifecycle_service.is_idrac_ready()
        assert dell.job_collection.get_unfinished_jobs() == []
        assert {v.value for v in manager_of(root).get_allowed_reset_manager_values()} == {"GracefulRestart"}


def test_idrac9_dell_services(lab: RedfishLab) -> None:
    state = lab.bmc("r740-1")
    with client(lab, "r740-1") as root:
        dell = manager_of(root).get_oem_extension("Dell")
        assert dell.lifecycle_service.is_idrac_ready() is True
        raw(
            lab,
            "r740-1",
            "PATCH",
            "/redfish/v1/Systems/System.Embedded.1",
            json={"Boot": {"BootSourceOverrideMode": "UEFI"}},
        )
        assert len(state.jobs) == 1
        dell.job_service.delete_jobs(["JID_CLEARALL"])
        assert state.jobs == {}
    # The reset drops every session, so reset on Basic auth (a SessionAuth would fail to log out).
    basic = sushy.Sushy(**lab.sushy_args("r740-1"), auth=sushy_auth.BasicAuth("root", "calvin"), verify=lab.ca_path)
    manager_of(basic).get_oem_extension("Dell").reset_idrac(wait=False)
    assert state.resets == 1


# ------------------------------------------------------------------------ manager reset
def _observe(url: str, ca: str, seconds: float) -> list[str]:
    """Poll ``url`` and return the distinct outcomes in order (refused/dropped, 503, 401, 200)."""
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            status = requests.get(url, auth=("root", "calvin"), verify=ca, timeout=2).status_code
            outcome = str(status)
        except requests.exceptions.ConnectionError as exc:
            outcome = "refused" if "refused" in str(exc).lower() else "dropped"
        if not seen or seen[-1] != outcome:
            seen.append(outcome)
        if outcome == "200" and len(seen) > 1:
            break
        time.sleep(0.03)
    return seen


@pytest.mark.parametrize("own_port", [False, True], ids=["prefix", "own-port"])
def test_manager_reset_downtime_window(own_port: bool) -> None:
    spec = BmcSpec(
        name="r730-1",
        personality="idrac8",
        port=0 if own_port else None,
        reset_down=1.0,
        reset_busy=0.8,
        reset_unauth=0.8,
    )
    with RedfishLab(bmcs=[spec], delay_scale=1.0) as rlab:
        with client(rlab, "r730-1", own_port=own_port) as root:
            manager_of(root)
        basic = sushy.Sushy(
            **rlab.sushy_args("r730-1", own_port=own_port),
            verify=rlab.ca_path,
            auth=sushy_auth.BasicAuth("root", "calvin"),
        )
        with client(rlab, "r730-1", own_port=own_port):
            pass  # a session that the reset drops (checked below)
        rlab.bmc("r730-1").login("root", "calvin")
        manager_of(basic).reset_manager(sushy.ResetType.GRACEFUL_RESTART)
        base = rlab.port_url("r730-1") if own_port else rlab.url("r730-1")
        seen = _observe(base + "/redfish/v1/Systems", rlab.ca_path, 6)
        state = rlab.bmc("r730-1")
        if own_port:  # the listener closes just after the reset's 204: a request may be dropped first
            assert [o for o in seen if o != "dropped"] == ["refused", "503", "401", "200"]
        else:
            assert seen == ["dropped", "503", "401", "200"]
        assert state.resets == 1
        assert state.sessions == {}  # the reset dropped every session
        body = requests.get(base + "/redfish/v1", verify=rlab.ca_path, timeout=5)
        assert body.status_code == 200


def test_manager_reset_busy_phase_message(lab: RedfishLab) -> None:
    spec = BmcSpec(name="x", personality="idrac8", reset_down=0, reset_busy=5, reset_unauth=0)
    with RedfishLab(bmcs=[spec], delay_scale=1.0) as rlab:
        assert (
            raw(
                rlab,
                "x",
                "POST",
                "/redfish/v1/Managers/iDRAC.Embedded.1/Actions/Manager.Reset",
                json={"ResetType": "GracefulRestart"},
            ).status_code
            == 204
        )
        response = raw(rlab, "x", "GET", "/redfish/v1/Systems")
        assert response.status_code == 503
        assert response.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "IDRAC.1.6.SYS518"


def test_manager_reset_type_outside_allowable_values(lab: RedfishLab) -> None:
    path = "/redfish/v1/Managers/iDRAC.Embedded.1/Actions/Manager.Reset"
    assert raw(lab, "r730-1", "POST", path, json={"ResetType": "ForceRestart"}).status_code == 400
    assert lab.bmc("r730-1").resets == 0


# ------------------------------------------------------------------------------ sessions
@pytest.mark.parametrize(
    ("personality", "status", "message"),
    [
        ("idrac8", 401, "Base.1.2.NoValidSession"),
        ("idrac9", 400, "IDRAC.2.8.RAC0218"),
        ("generic", 503, "Base.1.16.SessionLimitExceeded"),
    ],
)
def test_session_limit(lab: RedfishLab, personality: str, status: int, message: str) -> None:
    name = NAMES[personality]
    limit = {"idrac8": 4, "idrac9": 8, "generic": 16}[personality]
    sessions = "/redfish/v1/SessionService/Sessions"
    creds = {"UserName": "root", "Password": "calvin"}
    made = [raw(lab, name, "POST", sessions, json=creds, auth=None) for _attempt in range(limit)]
    assert all(r.status_code == 201 and r.headers["X-Auth-Token"] for r in made)
    refused = raw(lab, name, "POST", sessions, json=creds, auth=None)
    assert refused.status_code == status
    assert refused.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == message
    token = made[0].headers["X-Auth-Token"]
    assert raw(lab, name, "GET", "/redfish/v1/Systems", auth=None, headers={"X-Auth-Token": token}).ok
    logout = requests.delete(
        f"https://127.0.0.1:{lab.port}{made[0].headers['Location']}",
        verify=lab.ca_path,
        headers={"X-Auth-Token": token},
        timeout=5,
    )
    assert logout.status_code == 204
    assert raw(lab, name, "GET", "/redfish/v1/Systems", auth=None, headers={"X-Auth-Token": token}).status_code == 401
    assert raw(lab, name, "POST", sessions, json=creds, auth=None).status_code == 201


def test_session_limit_fault_and_sushy_logout(lab: RedfishLab) -> None:
    state = lab.bmc("r730-1")
    state.inject("session_limit", count=1)
    with pytest.raises(sushy.exceptions.AccessError), client(lab, "r730-1") as root:
        system_of(root)
    with client(lab, "r730-1") as root:
        system_of(root)
        assert len(state.sessions) == 1
    assert state.sessions == {}  # SessionAuth.__exit__ logged out
    assert state.counters["session_logout"] == 1


def test_wrong_password_and_basic_auth(lab: RedfishLab) -> None:
    with pytest.raises(sushy.exceptions.AccessError):
        sushy.Sushy(
            **lab.sushy_args("r740-1"), username="root", password="wrong", verify=lab.ca_path
        ).get_system_collection()
    basic = sushy.Sushy(**lab.sushy_args("r740-1"), auth=sushy_auth.BasicAuth("root", "calvin"), verify=lab.ca_path)
    assert system_of(basic).identity == "System.Embedded.1"
    for public in ("/redfish/v1", "/redfish/v1/odata", "/redfish/v1/$metadata"):  # no credentials needed
        assert raw(lab, "r740-1", "GET", public, auth=None).status_code == 200
    assert raw(lab, "r740-1", "GET", "/redfish/v1/Systems", auth=None).status_code == 401


# -------------------------------------------------------------------------------- faults
@pytest.mark.parametrize("personality", PERSONALITIES)
def test_first_insert_fails_with_sys446(lab: RedfishLab, images: dict[str, Any], personality: str) -> None:
    name = NAMES[personality]
    lab.bmc(name).inject("insert_sys446", count=1)
    with client(lab, name) as root:
        cd = cd_slot(system_of(root), manager_of(root))
        with pytest.raises(sushy.exceptions.ServerSideError) as caught:
            cd.insert_media(images["url"])
        assert caught.value.status_code == 500
        assert message_ids(caught.value)[0].endswith(".SYS446")
        assert "SYS446" in str(caught.value)
        cd.insert_media(images["url"])  # the second one works
        cd.refresh(force=True)
        assert cd.inserted is True


def test_vrm0021_until_the_idrac_is_reset(images: dict[str, Any]) -> None:
    spec = BmcSpec(name="r730-1", personality="idrac8", reset_down=0.2, reset_busy=0.1, reset_unauth=0.1)
    with RedfishLab(bmcs=[spec], delay_scale=1.0) as rlab:
        state = rlab.bmc("r730-1")
        state.inject("insert_vrm0021_until_reset")
        path = "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD/Actions/VirtualMedia.InsertMedia"
        for _attempt in range(3):
            response = raw(rlab, "r730-1", "POST", path, json={"Image": images["url"]})
            assert response.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "IDRAC.1.6.VRM0021"
        reset = "/redfish/v1/Managers/iDRAC.Embedded.1/Actions/Manager.Reset"
        assert raw(rlab, "r730-1", "POST", reset, json={"ResetType": "GracefulRestart"}).status_code == 204
        time.sleep(0.5)
        assert state.phase() == "up"
        assert raw(rlab, "r730-1", "POST", path, json={"Image": images["url"]}).status_code == 204


def test_eject_stuck_until_reset(lab: RedfishLab, images: dict[str, Any]) -> None:
    state = lab.bmc("r740-1")
    with client(lab, "r740-1") as root:
        cd = cd_slot(system_of(root), manager_of(root))
        cd.insert_media(images["url"])
        state.inject("eject_stuck_until_reset")
        cd.eject_media()
        cd.refresh(force=True)
        assert cd.inserted is True
    state.manager_reset()
    assert state.virtual_media["1"]["inserted"] is False
    assert "eject_stuck_until_reset" not in state.faults


def test_busy_503_burst(lab: RedfishLab) -> None:
    state = lab.bmc("gen-1")
    state.inject("busy_503", count=2)
    statuses = [raw(lab, "gen-1", "GET", "/redfish/v1/Systems").status_code for _attempt in range(3)]
    assert statuses == [503, 503, 200]
    state.inject("busy_503", count=2)
    with client(lab, "gen-1", retries=3) as root:  # sushy retries GETs on 5xx
        assert system_of(root).identity == "1"
    assert state.counters["status:503"] == 4


class _HoldRecorder:
    """Stands in for ``time`` inside ``lab.redfish.server``: records each hold instead of sleeping it."""

    def __init__(self) -> None:
        self.holds: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.holds.append(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_latency(lab: RedfishLab, monkeypatch: pytest.MonkeyPatch) -> None:
    """``latency`` holds exactly the next request for its ``seconds``, then it is spent.

    Proven from what the emulator does, not from a stopwatch: the HTTP layer's holds are
    recorded (the one seam is the ``time`` module it sleeps with), and the fault's counter.
    """
    holds = _HoldRecorder()
    monkeypatch.setattr(lab_redfish, "time", holds)
    state = lab.bmc("gen-1")
    state.inject("latency", count=1, seconds=0.3)
    assert raw(lab, "gen-1", "GET", "/redfish/v1").ok
    assert holds.holds == [0.3]  # the first request was held, for the armed seconds
    assert (state.counters["fault:latency"], state.peek("latency")) == (1, None)  # count 1: spent
    assert raw(lab, "gen-1", "GET", "/redfish/v1").ok
    assert holds.holds == [0.3]  # the next one was not held
    assert state.counters["fault:latency"] == 1
    state.inject("latency", count=1)  # without seconds: one second
    assert raw(lab, "gen-1", "GET", "/redfish/v1").ok
    assert holds.holds == [0.3, 1.0]


def test_generic_error_fault_matches_method_and_path(lab: RedfishLab, images: dict[str, Any]) -> None:
    state = lab.bmc("r740-1")
    state.inject("error", count=1, method="POST", path="InsertMedia", status=500, message_id="InternalError")
    assert raw(lab, "r740-1", "GET", "/redfish/v1/Systems").ok  # not matched: still armed
    path = "/redfish/v1/Systems/System.Embedded.1/VirtualMedia/1/Actions/VirtualMedia.InsertMedia"
    failed = raw(lab, "r740-1", "POST", path, json={"Image": images["url"]})
    assert failed.status_code == 500
    assert failed.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "Base.1.12.InternalError"
    assert raw(lab, "r740-1", "POST", path, json={"Image": images["url"]}).status_code == 204


def test_basic_writes_refused_switch() -> None:
    """Firmware that takes HTTP Basic for reads only: Basic writes 401, session writes work."""
    spec = BmcSpec(name="r730-ro", personality="idrac8", power_state="Off", basic_writes_refused=True)
    with RedfishLab(bmcs=[spec], delay_scale=0.0) as rlab:
        state = rlab.bmc("r730-ro")
        reset = "/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset"
        assert raw(rlab, "r730-ro", "GET", "/redfish/v1/Systems/System.Embedded.1").status_code == 200
        for _attempt in range(2):  # a firmware trait: every time, not consumed
            refused = raw(rlab, "r730-ro", "POST", reset, json={"ResetType": "On"})
            assert refused.status_code == 401
            assert refused.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"].endswith(".NoValidSession")
        assert state.power_state == "Off"  # a refused write is not applied
        with sushy_auth.SessionAuth("root", "calvin") as session:
            root = sushy.Sushy(**rlab.sushy_args("r730-ro"), auth=session, verify=rlab.ca_path)
            root.get_system("/bmc/r730-ro/redfish/v1/Systems/System.Embedded.1").reset_system(sushy.RESET_ON)
        assert state.power_state in ("PoweringOn", "On")
        assert state.counters["basic_write_refused"] == 2
        assert state.sessions == {}
        wrong = raw(rlab, "r730-ro", "POST", reset, json={"ResetType": "On"}, auth=("root", "wrong"))
        assert wrong.status_code == 401  # bad credentials stay a plain 401, not counted as a refusal
        assert state.counters["basic_write_refused"] == 2


def test_basic_writes_refused_fault_through_the_control_api(lab: RedfishLab) -> None:
    control = f"https://127.0.0.1:{lab.port}/lab/bmc/gen-1/faults"
    armed = requests.post(
        control, json={"fault": "basic_writes_refused", "count": 1, "status": 403}, verify=lab.ca_path, timeout=5
    )
    assert armed.json()["basic_writes_refused"] == {"name": "basic_writes_refused", "count": 1, "status": 403}
    system = "/redfish/v1/Systems/1"
    assert raw(lab, "gen-1", "GET", system).ok  # reads do not consume it
    body = {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}
    refused = raw(lab, "gen-1", "PATCH", system, json=body)
    assert refused.status_code == 403
    assert refused.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"].endswith(".InsufficientPrivilege")
    assert lab.bmc("gen-1").boot["target"] == "None"
    assert raw(lab, "gen-1", "PATCH", system, json=body).ok  # count 1: the next Basic write goes through
    assert lab.bmc("gen-1").counters["fault:basic_writes_refused"] == 1


def test_unknown_fault_is_refused(lab: RedfishLab) -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        lab.bmc("gen-1").inject("meteor")


def test_request_log_and_counters(lab: RedfishLab) -> None:
    state = lab.bmc("r730-1")
    raw(lab, "r730-1", "GET", "/redfish/v1/Systems/System.Embedded.1")
    raw(lab, "r730-1", "GET", "/redfish/v1/Nope")
    assert [(r.method, r.path, r.status) for r in state.requests] == [
        ("GET", "/redfish/v1/Systems/System.Embedded.1", 200),
        ("GET", "/redfish/v1/Nope", 404),
    ]
    assert state.counters["GET"] == 2
    assert state.counters["status:404"] == 1


def test_clear_faults(lab: RedfishLab) -> None:
    state = lab.bmc("gen-1")
    state.inject("busy_503", count=5)
    state.clear_faults()
    assert raw(lab, "gen-1", "GET", "/redfish/v1/Systems").ok


# ---------------------------------------------------------- command line and control API
def test_cli_serves_default_bmcs_and_control_api(tmp_path: Path, images: dict[str, Any]) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            *lab_command("lab.redfish.server"),
            "--port",
            str(port),
            "--state-dir",
            str(tmp_path),
            "--delay-scale",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=lab_environment({**os.environ, "PYTHONPATH": ""}),
    )
    try:
        ca = tmp_path / "ca.pem"
        deadline = time.monotonic() + 20
        base = f"https://127.0.0.1:{port}"
        while time.monotonic() < deadline:
            with contextlib.suppress(requests.exceptions.ConnectionError, FileNotFoundError, OSError):
                if ca.exists() and requests.get(base + "/lab/bmcs", verify=str(ca), timeout=2).ok:
                    break
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            time.sleep(0.1)
        entry = next(e for e in EMULATORS if e.name == "redfish")
        endpoint = entry.endpoint("127.0.0.1", port, tmp_path)
        assert requests.get(base + "/lab/bmcs", verify=str(ca), timeout=5).json() == {
            "ca_path": endpoint["ca_path"],
            "username": "root",
            "password": "calvin",
            "bmcs": endpoint["bmcs"],
        }
        assert entry.ready_files(tmp_path) == [ca, tmp_path / "metal-hosts.json"]  # labctl starts it with --metal-hosts
        assert {b["personality"] for b in endpoint["bmcs"].values()} == set(PERSONALITIES)
        fault = {"fault": "insert_sys446", "count": 1}
        r730 = base + "/lab/bmc/r730-1"
        assert requests.post(r730 + "/faults", json=fault, verify=str(ca), timeout=5).ok
        insert = endpoint["bmcs"]["r730-1"]["bmc_url"] + (
            "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD/Actions/VirtualMedia.InsertMedia"
        )
        failed = requests.post(
            insert, json={"Image": images["url"]}, auth=("root", "calvin"), verify=str(ca), timeout=5
        )
        assert failed.status_code == 500
        state = requests.get(r730 + "/state", verify=str(ca), timeout=5).json()
        assert state["counters"]["fault:insert_sys446"] == 1
        assert state["faults"] == {}
        assert requests.post(r730 + "/faults", json=fault, verify=str(ca), timeout=5).ok
        assert requests.delete(r730 + "/faults", verify=str(ca), timeout=5).status_code == 204
        done = requests.post(insert, json={"Image": images["url"]}, auth=("root", "calvin"), verify=str(ca), timeout=5)
        assert done.status_code == 204
        log = requests.get(r730 + "/requests", verify=str(ca), timeout=5).json()["requests"]
        assert [r["status"] for r in log] == [500, 204]
        assert json.loads((tmp_path / "redfish-bmcs.json").read_text())["bmcs"].keys() == endpoint["bmcs"].keys()
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_asset_tag_patch_follows_the_computer_system_schema(lab: RedfishLab, personality: str) -> None:
    """DMTF ComputerSystem ``AssetTag``: read-write string or null. With ETags (iDRAC9, generic) a stale
    ``If-Match`` is refused with 412 and changes nothing; iDRAC8 sends no ETag and takes the PATCH as is."""
    name, path = NAMES[personality], f"/redfish/v1/Systems/{SYSTEM[personality]}"
    first = raw(lab, name, "GET", path)
    etag = first.headers.get("ETag")
    assert (etag is not None) == (personality != "idrac8")
    headers = {"If-Match": etag} if etag else {}
    assert raw(lab, name, "PATCH", path, json={"AssetTag": "mp:dc1"}, headers=headers).status_code == 200
    assert raw(lab, name, "GET", path).json()["AssetTag"] == "mp:dc1"
    if etag:
        stale = raw(lab, name, "PATCH", path, json={"AssetTag": "other"}, headers={"If-Match": etag})
        assert stale.status_code == 412
        assert raw(lab, name, "GET", path).json()["AssetTag"] == "mp:dc1"
    wrong_type = raw(lab, name, "PATCH", path, json={"AssetTag": 42})
    assert wrong_type.status_code == 400
    assert wrong_type.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"].endswith("PropertyValueTypeError")
    assert raw(lab, name, "PATCH", path, json={"AssetTag": None}).status_code == 200
    assert raw(lab, name, "GET", path).json()["AssetTag"] == ""
