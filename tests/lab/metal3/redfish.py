"""The Redfish calls the simulated Ironic makes, over HTTPS to the lab BMCs, as its drivers do.

Why over the wire and not on ``BmcState`` directly: Metal3's contract with a BMC is Redfish, and the lab's BMC
faults (``insert_sys446``, ``insert_vrm0021_until_reset``, a reset window, wrong credentials) live in its HTTP
layer. Going through it makes every fault a test injects reach the BareMetalHost the way it would reach
Ironic, and leaves the BMC's request log and state as Ironic's would.

The two boot interfaces of ``spec.bmc.address`` differ where Ironic's do: ``redfish-virtual-media`` sets a
one-time ``BootSourceOverrideTarget: Cd``; ``idrac-redfish-virtual-media`` sets the one-time boot from the
virtual CD with Dell's ``ImportSystemConfiguration`` (``ServerBoot.1#BootOnce``/``FirstBootDevice=VCD-DVD``),
because an iDRAC's ``Cd`` override boots the physical drive.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

from lab.metal3.contract import BmcAddress

REQUEST_TIMEOUT = 10.0  # seconds for one Redfish request (sushy's default is 60; the lab answers at once)
POWER_POLL = 0.05  # seconds between power state reads while waiting for a transition
# How long a power transition may take, in seconds of lab time (scaled) with a real floor that bounds a failure:
# Ironic's [conductor]power_state_change_timeout is 60 s.
POWER_TIMEOUT = 60.0
POWER_TIMEOUT_FLOOR = 10.0
CD_MEDIA_TYPES = ("CD", "DVD")
DELL_VENDOR = "Dell"


class RedfishFailure(Exception):
    """A Redfish request failed: HTTP status (0 when the BMC did not answer), MessageId and text."""

    def __init__(self, status: int, message_id: str, text: str) -> None:
        super().__init__(f"HTTP {status} {message_id}: {text}" if status else text)
        self.status = status
        self.message_id = message_id
        self.text = text


def _error_of(status: int, raw: bytes) -> RedfishFailure:
    try:
        body = json.loads(raw or b"{}")
        info = (body.get("error") or {}).get("@Message.ExtendedInfo") or [{}]
        return RedfishFailure(status, str(info[0].get("MessageId", "")), str(info[0].get("Message", "")))
    except (ValueError, AttributeError, IndexError):
        return RedfishFailure(status, "", raw[:200].decode("utf-8", "replace"))


class RedfishClient:
    """HTTP Basic Redfish client for one system of one BMC (``spec.bmc.address`` and its Secret)."""

    def __init__(
        self,
        address: BmcAddress,
        username: str,
        password: str,
        *,
        ca_path: str | None,
        verify: bool,
        delay_scale: float,
    ) -> None:
        self.address = address
        self.delay_scale = delay_scale
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self._auth = f"Basic {token}"
        self._context = (
            ssl.create_default_context(cafile=ca_path) if verify and ca_path else ssl.create_default_context()
        )
        if not verify:
            self._context.check_hostname = False
            self._context.verify_mode = ssl.CERT_NONE

    # ------------------------------------------------------------------------------ transport
    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.address.base_url + path, data=data, method=method)
        request.add_header("Authorization", self._auth)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT, context=self._context) as answer:
                raw = answer.read()
                return answer.status, json.loads(raw) if raw.strip() else {}
        except urllib.error.HTTPError as exc:
            raise _error_of(exc.code, exc.read()) from None
        except (OSError, ValueError) as exc:
            raise RedfishFailure(0, "", f"the BMC at {self.address.base_url} did not answer: {exc}") from None

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)[1]

    # ------------------------------------------------------------------------------ system
    def system(self) -> dict[str, Any]:
        return self.get(self.address.system_path)

    def is_dell(self, system: dict[str, Any] | None = None) -> bool:
        return DELL_VENDOR in str((system or self.system()).get("Manufacturer", ""))

    def power_state(self) -> str:
        return str(self.system().get("PowerState", ""))

    def reset(self, reset_type: str) -> None:
        self.request("POST", f"{self.address.system_path}/Actions/ComputerSystem.Reset", {"ResetType": reset_type})

    def _wait_power(self, wanted: str) -> None:
        deadline = time.monotonic() + max(POWER_TIMEOUT * self.delay_scale, POWER_TIMEOUT_FLOOR)
        while (state := self.power_state()) != wanted:
            if time.monotonic() > deadline:
                msg = f"the power state stayed {state}, wanted {wanted}"
                raise RedfishFailure(0, "", msg)
            time.sleep(POWER_POLL)

    def power_on(self) -> None:
        if self.power_state() != "On":
            self.reset("On")
            self._wait_power("On")

    def power_off(self) -> None:
        if self.power_state() != "Off":
            self.reset("ForceOff")
            self._wait_power("Off")

    def set_boot(self, target: str, enabled: str) -> None:
        body = {"Boot": {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": enabled}}
        self.request("PATCH", self.address.system_path, body)

    def dell_boot_once_virtual_cd(self, system: dict[str, Any]) -> None:
        """Ironic's idrac-redfish-virtual-media: the one-time boot from the virtual CD through Dell's SCP import."""
        manager_path = str(((system.get("Links") or {}).get("ManagedBy") or [{}])[0].get("@odata.id", ""))
        manager = self.get(manager_path)
        fqdd = manager.get("Id", "iDRAC.Embedded.1")
        actions = (manager.get("Actions") or {}).get("Oem") or {}
        target = next(
            (str(v["target"]) for k, v in actions.items() if k.endswith("ImportSystemConfiguration")),
            f"{manager_path}/Actions/Oem/EID_674_Manager.ImportSystemConfiguration",
        )
        buffer = (
            f'<SystemConfiguration><Component FQDD="{fqdd}">'
            '<Attribute Name="ServerBoot.1#BootOnce">Enabled</Attribute>'
            '<Attribute Name="ServerBoot.1#FirstBootDevice">VCD-DVD</Attribute>'
            "</Component></SystemConfiguration>"
        )
        body = {"ShareParameters": {"Target": "ALL"}, "ImportBuffer": buffer, "ShutdownType": "NoReboot"}
        self.request("POST", target, body)

    # ------------------------------------------------------------------------- virtual media
    def cd_slot(self, system: dict[str, Any]) -> dict[str, Any]:
        """The virtual CD: under the system (DMTF 1.8+), else under its manager (iDRAC)."""
        collection = (system.get("VirtualMedia") or {}).get("@odata.id")
        if not collection:
            manager_path = str(((system.get("Links") or {}).get("ManagedBy") or [{}])[0].get("@odata.id", ""))
            collection = (self.get(manager_path).get("VirtualMedia") or {}).get("@odata.id") if manager_path else None
        if not collection:
            raise RedfishFailure(0, "", "the BMC has no virtual media (no licence, or not a virtual media BMC)")
        for member in self.get(str(collection)).get("Members") or []:
            slot = self.get(str(member["@odata.id"]))
            if any(t in CD_MEDIA_TYPES for t in slot.get("MediaTypes") or []):
                return slot
        raise RedfishFailure(0, "", "the BMC has no virtual CD")

    def eject(self, slot: dict[str, Any]) -> None:
        if slot.get("Inserted"):
            action = slot["Actions"]["#VirtualMedia.EjectMedia"]["target"]
            self.request("POST", str(action), {})

    def insert(self, slot: dict[str, Any], image: str) -> None:
        action = slot["Actions"]["#VirtualMedia.InsertMedia"]["target"]
        self.request("POST", str(action), {"Image": image, "Inserted": True, "WriteProtected": True})
