# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dell iDRAC8 (12G/13G, e.g. R730): what differs from standard Redfish.

* ``BootSourceOverrideTarget=Cd`` boots the *physical* drive; the virtual CD is booted through
  Dell's SCP import (sushy's ``set_virtual_boot_device``; dell/iDRAC-Redfish-Scripting#90,
  dell/dellemc-openmanage-ansible-modules#693, openstack/ironic ``drivers/modules/drac/boot.py``).
* The persistent boot order is a BIOS setting: PATCH ``BootSources/Settings`` (``BootSeq`` in
  Legacy, ``UefiBootSeq`` in UEFI), then create a BIOS config job that a reboot applies (Dell's
  iDRAC-Redfish-Scripting boot-order scripts; community.general ``idrac_redfish_command`` ``CreateBiosConfigJob``).
* Boot mode is the BIOS attribute ``BootMode`` (``Uefi``/``Bios``) plus a job, since
  ``BootSourceOverrideMode`` is read-only on 13G (``SYS410``/``SYS444``, ansible-collections/community.general#5091).
* Virtual media lives under the Manager (CD, RemovableDisk).
* Dell's iDRACReset service is missing: reset with ``Manager.Reset GracefulRestart``.

sushy's ``manager.get_oem_extension('Dell')`` reads the Manager twice more (it clones the resource,
then refreshes it to parse the OEM subtree). ``dell_manager_extension`` builds the same sushy
``DellManagerExtension`` from the Manager document this task already read, through sushy's own
reader hook, so the SCP boot costs the import POST and the task poll only.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import RedfishError, UnsupportedError

from . import BootOrderState
from .bios_settings import DELL, BiosSettings
from .generic import Generic

try:
    import sushy
    from sushy.oem.dell.resources.manager.manager import DellManagerExtension
    from sushy.resources import base as sushy_base

    _READER_BASE: Any = sushy_base.AbstractDataReader
except ImportError:  # pragma: no cover - guarded by session.SUSHY_IMPORT_ERROR
    sushy = None
    _READER_BASE = object

SCP_TASK_DONE = "Completed"  # Task.TaskState of a finished SCP import; Exception/Killed/Cancelled = failed


class _LoadedReader(_READER_BASE):  # type: ignore[misc,valid-type]
    """sushy data reader that serves a document this task already read (no HTTP)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self._document = document

    def get_data(self) -> Any:
        return sushy_base.FieldData(200, {}, self._document)


def dell_manager_extension(client: Any) -> Any:
    """sushy's Dell OEM extension of the client's Manager, parsed from the Manager already read."""
    manager = client.manager
    extension = DellManagerExtension(
        client.connector,
        manager.path,
        redfish_version=manager.redfish_version,
        registries=manager.registries,
        reader=_LoadedReader(manager.json),
        root=manager.root,
    )
    return extension.set_parent_resource(manager, "Dell")


BIOS_MODES = {"UEFI": "Uefi", "Legacy": "Bios"}  # BootSourceOverrideMode -> BIOS BootMode


def seq_key(bios_boot_mode: str | None) -> str:
    """Which BootSources attribute holds the order in this BIOS mode."""
    return "UefiBootSeq" if bios_boot_mode == "Uefi" else "BootSeq"


class DellIdrac8(Generic):
    name = "dell_idrac8"
    bios_settings: BiosSettings = DELL

    def virtual_media_slots(self, client: Any) -> list[Any]:
        try:
            return list(client.manager.virtual_media.get_members())
        except sushy.exceptions.MissingAttributeError:
            return super().virtual_media_slots(client)

    def set_one_time_boot(self, client: Any, device: str, persistent: bool) -> dict[str, Any]:
        if device != "virtual_cd":
            return super().set_one_time_boot(client, device, persistent)
        oem = client.call("Loading Dell's OEM extension", dell_manager_extension, client)
        # sushy posts the import and polls its task until the iDRAC stops answering 202.
        response = client.call(
            "Booting the virtual CD through Dell's configuration import (SCP)",
            oem.set_virtual_boot_device,
            sushy.VIRTUAL_MEDIA_CD,
            persistent=persistent,
            manager=client.manager,
            system=client.system,
        )
        task_state = scp_task_state(response)
        if task_state not in (None, SCP_TASK_DONE):
            raise RedfishError(f"Dell's configuration import (SCP) for the virtual CD boot ended {task_state}")
        return {
            "method": "Dell SCP ImportSystemConfiguration",
            "target": "VCD-DVD",
            "enabled": "Continuous" if persistent else "Once",
            "verified": task_state == SCP_TASK_DONE,
        }

    # -- BIOS-backed settings --------------------------------------------------------------
    def bios_attributes(self, client: Any) -> dict[str, Any]:
        body = client.get_json(client.system_path() + "/Bios", "Reading BIOS attributes")
        return dict(body.get("Attributes") or {})

    def commit_bios(self, client: Any) -> str | None:
        """One BIOS config job for every pending BootSources/Bios write (iDRAC8 allows one at a time)."""
        existing = self.scheduled_bios_job(client)
        if existing:
            return existing
        manager_path = client.manager.path
        response = client.post(
            manager_path + "/Jobs",
            {"TargetSettingsURI": client.system_path() + "/Bios/Settings"},
            "Creating the BIOS configuration job",
        )
        location = response.headers.get("Location") or ""
        if location:
            return location.rstrip("/").rsplit("/", 1)[-1]
        try:
            return str(response.json().get("Id")) or None
        except ValueError:
            return None

    def scheduled_bios_job(self, client: Any) -> str | None:
        """A BIOS job already waiting for a reboot (a previous run's), which the reboot will also apply."""
        jobs = client.get_json(client.manager.path + "/Jobs", "Listing jobs")
        for member in jobs.get("Members") or []:
            job = member if "JobState" in member else client.get_json(member["@odata.id"], "Reading a job")
            if job.get("JobType") == "BIOSConfiguration" and job.get("JobState") in ("Scheduled", "New"):
                return str(job.get("Id"))
        return None

    def set_boot_mode(self, client: Any, mode: str) -> dict[str, Any]:
        client.patch(
            client.system_path() + "/Bios/Settings",
            {"Attributes": {"BootMode": BIOS_MODES[mode]}},
            f"Setting the BIOS BootMode to {BIOS_MODES[mode]}",
        )
        return {"method": "Bios.BootMode", "mode": mode, "needs_job": True}

    def read_boot_order(self, client: Any) -> BootOrderState:
        """The persistent order the server's next POST boots by: ``BootSources``, or its pending ``Settings`` while
        a BIOS job is scheduled to apply them.

        Why the pending one: a teardown's restore is such a job, and it waits for the next power-on, which is the
        next claim's install. Read from the current order, that claim would record the order the previous install
        left as the one to restore, and decide the virtual CD fix from an order the next POST replaces.
        """
        mode = self.bios_attributes(client).get("BootMode")
        key = seq_key(mode)
        body = client.get_json(client.system_path() + "/BootSources", "Reading BootSources")
        entries = list((body.get("Attributes") or {}).get(key) or [])
        source = f"BootSources.{key}"
        pending = self._pending_entries(client, key)
        if pending and self.scheduled_bios_job(client):
            entries, source = pending, f"BootSources/Settings.{key} (pending, applied by a scheduled BIOS job)"
        if not entries:
            raise UnsupportedError(f"BootSources has no {key} list (BIOS BootMode {mode!r})")
        entries.sort(key=lambda e: int(e.get("Index", 0)))
        # Entries are keyed by Name, the device FQDD ("NIC.Integrated.1-1-1"); the Id
        # ("BIOS.Setup.1-1#BootSeq#<FQDD>#<hash>") is accepted as an alias.
        order = [str(e["Name"]) for e in entries if e.get("Enabled", True)]
        names: dict[str, str] = {}
        for entry in entries:
            for alias in (entry.get("Name"), entry.get("Id")):
                if alias:
                    names[str(alias)] = str(entry["Name"])
        return BootOrderState(order=order, names=names, source=source, raw={"key": key, "entries": entries})

    def _pending_entries(self, client: Any, key: str) -> list[dict[str, Any]]:
        """``BootSources/Settings``' pending ``key`` list (empty when nothing is pending or it cannot be read)."""
        try:
            body = client.get_json(client.system_path() + "/BootSources/Settings", "Reading pending BootSources")
        except RedfishError:
            return []
        return list((body.get("Attributes") or {}).get(key) or [])

    def set_boot_order(self, client: Any, state: BootOrderState, new_order: list[str]) -> dict[str, Any]:
        key = state.raw["key"]
        entries = plan_boot_seq(state.raw["entries"], new_order)
        client.patch(client.system_path() + "/BootSources/Settings", {"Attributes": {key: entries}}, f"Setting {key}")
        return {"method": f"BootSources.{key}", "needs_job": True}

    def reset_bmc(self, client: Any) -> str:
        client.call(
            "Resetting the iDRAC (GracefulRestart)", client.manager.reset_manager, sushy.ResetType.GRACEFUL_RESTART
        )
        return "Manager.Reset GracefulRestart"


def scp_task_state(response: Any) -> str | None:
    """Pure: ``TaskState`` of the final SCP task document (None when the reply has no JSON body)."""
    try:
        body = response.json() if getattr(response, "content", b"") else None
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    state = body.get("TaskState") or ((body.get("Oem") or {}).get("Dell") or {}).get("JobState")
    return str(state) if state else None


def plan_boot_seq(entries: list[dict[str, Any]], new_order: list[str]) -> list[dict[str, Any]]:
    """Pure: BootSeq entries (keyed by Name) re-indexed so ``new_order`` comes first, enabled."""
    by_name = {str(e["Name"]): e for e in entries}
    ordered = [by_name[name] for name in new_order] + sorted(
        (e for e in entries if str(e["Name"]) not in new_order), key=lambda e: int(e.get("Index", 0))
    )
    result = []
    for index, entry in enumerate(ordered):
        item = dict(entry)
        item["Index"] = index
        if str(entry["Name"]) in new_order:
            item["Enabled"] = True
        result.append(item)
    return result
