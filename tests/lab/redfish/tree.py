"""The Redfish resources of one emulated BMC, and what GET/PATCH/POST/DELETE do to them.

Why: one place that knows the resource shapes per personality (iDRAC8 13G, iDRAC9 14G+, generic
DMTF), built from the live ``BmcState`` on every request, so a GET always shows the state that the
last action produced. Paths are canonical (``/redfish/v1/...``); the HTTP layer in
``lab.redfish.server`` rewrites them under each BMC's mount prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from lab.redfish.bmc import (
    BOOT_OPTIONS,
    ENABLED_DISABLED_ATTRIBUTES,
    GPU_MODEL,
    LEGACY_DEVICES,
    UEFI_DEVICES,
    BmcError,
    BmcState,
    Reply,
    parse_scp_buffer,
)

R = "/redfish/v1"
Doc = dict[str, Any]


def ref(path: str) -> Doc:
    return {"@odata.id": path}


def collection(path: str, odata_type: str, name: str, members: list[str]) -> Doc:
    return {
        "@odata.id": path,
        "@odata.type": f"#{odata_type}",
        "Name": name,
        "Members": [ref(m) for m in members],
        "Members@odata.count": len(members),
    }


class Tree:
    """Resource builders and handlers bound to one BMC state."""

    def __init__(self, state: BmcState) -> None:
        self.s = state
        p = state.p
        self.p = p
        self.S = f"{R}/Systems/{p.system_id}"
        self.M = f"{R}/Managers/{p.manager_id}"
        self.C = f"{R}/Chassis/{p.chassis_id}"
        self.vm_base = f"{self.S}/VirtualMedia" if p.vm_location in ("system", "both") else f"{self.M}/VirtualMedia"
        self.dell_base = f"{R}/Dell/Managers/{p.manager_id}"
        self.pcie_base = f"{self.C}/PCIeDevices" if p.pcie_under_chassis else f"{self.S}/PCIeDevices"
        # Dell's OEM objects (Oem.Dell, Links.Oem.Dell) carry an @odata.type, like every Redfish
        # object with OEM content: "DellOem.v1_x_0.DellOemResources/DellOemLinks" as iDRAC9 names
        # them; the 13G version number is this emulator's assumption.
        self.dell_oem_version = "v1_0_0" if p.name == "idrac8" else "v1_3_0"
        # The server's one disk behind its RAID controller (Dell's FQDD naming), with the WWN and serial the
        # simulated host installs onto (``BmcState.disk``).
        self.storage_path = f"{self.S}/Storage/RAID.Integrated.1-1"
        self.drive_path = f"{self.storage_path}/Drives/Disk.Bay.0:Enclosure.Internal.0-1:RAID.Integrated.1-1"

    # =================================================================== GET
    def get(self, path: str, query: str) -> Doc | None:
        """The resource at ``path``, or None when there is none."""
        s, p = self.s, self.p
        static: dict[str, Callable[[], Doc]] = {
            R: self.service_root,
            f"{R}/odata": self.odata,
            f"{R}/SessionService": self.session_service,
            f"{R}/SessionService/Sessions": lambda: collection(
                f"{R}/SessionService/Sessions",
                "SessionCollection.SessionCollection",
                "Session Collection",
                [f"{R}/SessionService/Sessions/{sid}" for sid in s.sessions],
            ),
            f"{R}/Systems": lambda: collection(
                f"{R}/Systems",
                "ComputerSystemCollection.ComputerSystemCollection",
                "Computer System Collection",
                [self.S],
            ),
            self.S: self.system,
            f"{self.S}/Bios": self.bios,
            f"{self.S}/Bios/Settings": self.bios_settings,
            f"{self.S}/EthernetInterfaces": lambda: collection(
                f"{self.S}/EthernetInterfaces",
                "EthernetInterfaceCollection.EthernetInterfaceCollection",
                "System Ethernet Interface Collection",
                [f"{self.S}/EthernetInterfaces/{n}" for n in self.nic_ids()],
            ),
            f"{R}/Managers": lambda: collection(
                f"{R}/Managers", "ManagerCollection.ManagerCollection", "Manager Collection", [self.M]
            ),
            self.M: self.manager,
            f"{R}/Chassis": lambda: collection(
                f"{R}/Chassis", "ChassisCollection.ChassisCollection", "Chassis Collection", [self.C]
            ),
            self.C: self.chassis,
            f"{R}/TaskService": self.task_service,
            f"{R}/TaskService/Tasks": lambda: collection(
                f"{R}/TaskService/Tasks",
                "TaskCollection.TaskCollection",
                "Task Collection",
                [f"{R}/TaskService/Tasks/{j}" for j, job in s.jobs.items() if job["JobType"] == "ImportConfiguration"],
            ),
        }
        if p.vm_location in ("system", "both") and s.spec.virtual_media:
            static[f"{self.S}/VirtualMedia"] = self.vm_collection(f"{self.S}/VirtualMedia")
        if p.vm_location in ("manager", "both") and s.spec.virtual_media:
            static[f"{self.M}/VirtualMedia"] = self.vm_collection(f"{self.M}/VirtualMedia")
        static[f"{self.S}/Storage"] = lambda: collection(
            f"{self.S}/Storage", "StorageCollection.StorageCollection", "Storage Collection", [self.storage_path]
        )
        static[self.storage_path] = self.storage
        static[self.drive_path] = self.drive
        if p.boot_order:
            static[f"{self.S}/BootOptions"] = lambda: collection(
                f"{self.S}/BootOptions",
                "BootOptionCollection.BootOptionCollection",
                "Boot Options Collection",
                [f"{self.S}/BootOptions/{o}" for o in BOOT_OPTIONS],
            )
        if p.pcie_under_chassis:
            static[self.pcie_base] = lambda: collection(
                self.pcie_base,
                "PCIeDeviceCollection.PCIeDeviceCollection",
                "PCIe Device Collection",
                [f"{self.pcie_base}/{d}" for d in self.gpu_ids()],
            )
        if not p.dell:
            static[f"{self.S}/SecureBoot"] = self.secure_boot
        if p.boot_sources:
            static[f"{self.S}/BootSources"] = self.boot_sources
            static[f"{self.S}/BootSources/Settings"] = self.boot_sources_settings
        if p.dell:
            static[f"{self.M}/Jobs"] = lambda: self.jobs_collection("$expand" in query)
        if p.dell_services:
            static[f"{self.dell_base}/DelliDRACCardService"] = self.idrac_card_service
            static[f"{self.dell_base}/DellLCService"] = self.lc_service
            static[f"{self.dell_base}/DellJobService"] = self.job_service
        if path in static:
            return static[path]()
        return self.get_member(path)

    def get_member(self, path: str) -> Doc | None:  # noqa: PLR0911
        s = self.s
        parent, _unused, leaf = path.rpartition("/")
        if parent == f"{R}/SessionService/Sessions" and leaf in s.sessions:
            sess = s.sessions[leaf]
            return {
                "@odata.id": path,
                "@odata.type": "#Session.v1_0_2.Session",
                "Id": leaf,
                "Name": "User Session",
                "UserName": sess["UserName"],
            }
        if parent == self.vm_base and leaf in s.slots:
            return self.vm_slot(leaf)
        if parent == f"{self.S}/EthernetInterfaces" and leaf in self.nic_ids():
            return self.nic(leaf)
        if parent == self.pcie_base and leaf in self.gpu_ids():
            return self.gpu(leaf)
        if self.p.boot_order and parent == f"{self.S}/BootOptions" and leaf in BOOT_OPTIONS:
            return {
                "@odata.id": path,
                "@odata.type": "#BootOption.v1_0_4.BootOption",
                "Id": leaf,
                "Name": leaf,
                "BootOptionReference": leaf,
                "DisplayName": BOOT_OPTIONS[leaf][0],
                "BootOptionEnabled": True,
            }
        if self.p.dell and parent == f"{self.M}/Jobs" and leaf in s.jobs:
            return self.job(leaf)
        if parent == f"{R}/TaskService/Tasks" and leaf in s.jobs:
            return self.task(leaf)
        return None

    # ---------------------------------------------------------- resources
    def service_root(self) -> Doc:
        p = self.p
        doc: Doc = {
            "@odata.id": f"{R}",
            "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
            "Id": "RootService",
            "Name": "Root Service",
            "RedfishVersion": p.redfish_version,
            "UUID": self.s.uuid,
            "Product": "Integrated Dell Remote Access Controller" if p.dell else p.manager_model,
            "Vendor": "Dell" if p.dell else p.manufacturer,
            "Systems": ref(f"{R}/Systems"),
            "Managers": ref(f"{R}/Managers"),
            "Chassis": ref(f"{R}/Chassis"),
            "SessionService": ref(f"{R}/SessionService"),
            "Tasks": ref(f"{R}/TaskService"),  # DMTF's ServiceRoot names the TaskService link "Tasks"
            "Links": {"Sessions": ref(f"{R}/SessionService/Sessions")},
        }
        if p.only_member_query:
            doc["ProtocolFeaturesSupported"] = {"OnlyMemberQuery": True}
        return doc

    def odata(self) -> Doc:
        # The service document names each singleton by its ServiceRoot property ("Tasks").
        singletons = ("Systems", "Managers", "Chassis", "SessionService", ("Tasks", "TaskService"))
        pairs = [(s, s) if isinstance(s, str) else s for s in singletons]
        return {
            "@odata.context": f"{R}/$metadata",
            "value": [{"name": n, "kind": "Singleton", "url": f"{R}/{path}"} for n, path in pairs],
        }

    def session_service(self) -> Doc:
        return {
            "@odata.id": f"{R}/SessionService",
            "@odata.type": "#SessionService.v1_1_3.SessionService",
            "Id": "SessionService",
            "Name": "Session Service",
            "ServiceEnabled": True,
            "SessionTimeout": 1800,
            "Sessions": ref(f"{R}/SessionService/Sessions"),
        }

    def system(self) -> Doc:
        s, p = self.s, self.p
        boot: Doc = {
            "BootSourceOverrideEnabled": s.override_enabled,
            "BootSourceOverrideEnabled@Redfish.AllowableValues": ["Once", "Continuous", "Disabled"],
            "BootSourceOverrideTarget": s.override_target,
            "BootSourceOverrideTarget@Redfish.AllowableValues": list(p.boot_targets),
            "UefiTargetBootSourceOverride": s.uefi_target,
        }
        boot["BootSourceOverrideMode"] = "UEFI" if s.bios["BootMode"] == "Uefi" else "Legacy"
        if p.mode_writable:
            boot["BootSourceOverrideMode@Redfish.AllowableValues"] = ["UEFI", "Legacy"]
        if p.boot_order:
            boot["BootOrder"] = list(s.boot_options_order)
            boot["BootOptions"] = ref(f"{self.S}/BootOptions")
        doc: Doc = {
            "@odata.id": self.S,
            "@odata.type": "#ComputerSystem.v1_5_0.ComputerSystem"
            if p.name == "idrac8"
            else "#ComputerSystem.v1_13_0.ComputerSystem",
            "Id": p.system_id,
            "Name": "System",
            "SystemType": "Physical",
            "Manufacturer": p.manufacturer,
            "Model": p.model,
            "SKU": s.serial,
            "SerialNumber": s.serial,
            "UUID": s.uuid,
            "AssetTag": s.bios.get("AssetTag", ""),
            "BiosVersion": p.bios_version,
            "HostName": "",
            "PowerState": s.power_state,
            "IndicatorLED": "Off",
            "Status": {"State": "Enabled", "Health": "OK"},
            "ProcessorSummary": {"Count": 2, "Model": "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz"},
            "MemorySummary": {"TotalSystemMemoryGiB": 256, "Status": {"State": "Enabled", "Health": "OK"}},
            "Boot": boot,
            "Bios": ref(f"{self.S}/Bios"),
            "EthernetInterfaces": ref(f"{self.S}/EthernetInterfaces"),
            "Storage": ref(f"{self.S}/Storage"),
            "PCIeDevices": [ref(f"{self.pcie_base}/{g}") for g in self.gpu_ids()],
            "PCIeDevices@odata.count": len(self.gpu_ids()),
            "Links": {
                "Chassis": [ref(self.C)],
                "ManagedBy": [ref(self.M)],
            },
            "Actions": {
                "#ComputerSystem.Reset": {
                    "target": f"{self.S}/Actions/ComputerSystem.Reset",
                    "ResetType@Redfish.AllowableValues": list(p.reset_types),
                }
            },
        }
        if p.vm_location in ("system", "both") and s.spec.virtual_media:
            doc["VirtualMedia"] = ref(f"{self.S}/VirtualMedia")
        if not p.dell:  # a Dell here keeps Secure Boot as the BIOS attribute SecureBoot
            doc["SecureBoot"] = ref(f"{self.S}/SecureBoot")
        if p.dell:
            doc["Oem"] = {
                "Dell": {
                    "@odata.type": f"#DellOem.{self.dell_oem_version}.DellOemResources",
                    "DellSystem": {
                        "@odata.type": "#DellSystem.v1_0_0.DellSystem",
                        "Id": p.system_id,
                        "CurrentRollupStatus": "Ok",
                    },
                }
            }
            if p.dell_services:  # iDRAC9 (14G+) states the server generation here; iDRAC8 does not
                doc["Oem"]["Dell"]["DellSystem"]["SystemGeneration"] = p.manager_model
        if p.boot_sources:
            doc["Links"]["Oem"] = {
                "Dell": {
                    "@odata.type": f"#DellOem.{self.dell_oem_version}.DellOemLinks",
                    "BootSources": ref(f"{self.S}/BootSources"),
                }
            }
        return doc

    def bios(self) -> Doc:
        s, p = self.s, self.p
        doc: Doc = {
            "@odata.id": f"{self.S}/Bios",
            "@odata.type": "#Bios.v1_0_0.Bios",
            "Id": "Bios",
            "Name": "BIOS Configuration Current Settings",
            "AttributeRegistry": "BiosAttributeRegistry.v1_0_0",
            "Attributes": dict(s.bios),
            "@Redfish.Settings": {
                "@odata.type": "#Settings.v1_1_0.Settings",
                "SettingsObject": ref(f"{self.S}/Bios/Settings"),
            },
            "Actions": {"#Bios.ResetBios": {"target": f"{self.S}/Bios/Actions/Bios.ResetBios"}},
        }
        if p.bios_apply_times:
            doc["@Redfish.Settings"]["SupportedApplyTimes"] = list(p.bios_apply_times)
        return doc

    def secure_boot(self) -> Doc:
        """DMTF SecureBoot (v1_0_4, in DSP8010 2018.2): Enable applies at the next boot, CurrentBoot is now."""
        enabled = self.s.secure_boot_enable
        return {
            "@odata.id": f"{self.S}/SecureBoot",
            "@odata.type": "#SecureBoot.v1_0_4.SecureBoot",
            "Id": "SecureBoot",
            "Name": "UEFI Secure Boot",
            "SecureBootEnable": enabled,
            "SecureBootCurrentBoot": "Enabled" if enabled else "Disabled",
            "SecureBootMode": "DeployedMode" if enabled else "SetupMode",
        }

    def bios_settings(self) -> Doc:
        return {
            "@odata.id": f"{self.S}/Bios/Settings",
            "@odata.type": "#Bios.v1_0_0.Bios",
            "Id": "Settings",
            "Name": "BIOS Configuration Pending Settings",
            "Attributes": dict(self.s.pending_bios),
        }

    def boot_sources(self) -> Doc:
        return {
            "@odata.id": f"{self.S}/BootSources",
            "@odata.type": "#DellBootSources.v1_0_0.DellBootSources",
            "Id": "BootSources",
            "Name": "Boot Sources Configuration Current Settings",
            "Description": "Boot Sources Configuration Current Settings",
            "Attributes": {k: [dict(e) for e in v] for k, v in self.s.boot_seq.items()},
            "@Redfish.Settings": {
                "@odata.type": "#Settings.v1_1_0.Settings",
                "SettingsObject": ref(f"{self.S}/BootSources/Settings"),
            },
        }

    def boot_sources_settings(self) -> Doc:
        return {
            "@odata.id": f"{self.S}/BootSources/Settings",
            "@odata.type": "#DellBootSources.v1_0_0.DellBootSources",
            "Id": "Settings",
            "Name": "Boot Sources Configuration Pending Settings",
            "Attributes": {k: [dict(e) for e in v] for k, v in self.s.pending_boot_seq.items()},
        }

    def storage(self) -> Doc:
        return {
            "@odata.id": self.storage_path,
            "@odata.type": "#Storage.v1_4_0.Storage",
            "Id": "RAID.Integrated.1-1",
            "Name": "PERC H730P Mini",
            "Drives": [ref(self.drive_path)],
            "Drives@odata.count": 1,
            "Status": {"State": "Enabled", "Health": "OK"},
        }

    def drive(self) -> Doc:
        disk = self.s.disk
        return {
            "@odata.id": self.drive_path,
            "@odata.type": "#Drive.v1_4_0.Drive",
            "Id": self.drive_path.rsplit("/", 1)[-1],
            "Name": "Physical Disk 0:1:0",
            "Model": "ST1200MM0099",
            "Manufacturer": "SEAGATE",
            "SerialNumber": disk["serial"],
            "CapacityBytes": 1200243695616,
            "MediaType": "HDD",
            "Protocol": "SAS",
            # Dell reports the WWN as the NAA durable name, in upper-case hex without a prefix.
            "Identifiers": [{"DurableName": disk["wwn"].removeprefix("0x").upper(), "DurableNameFormat": "NAA"}],
            "Status": {"State": "Enabled", "Health": "OK"},
        }

    def nic_ids(self) -> list[str]:
        return [f"NIC.Integrated.1-{i + 1}-1" for i in range(len(self.s.macs))]

    def nic(self, nic_id: str) -> Doc:
        mac = self.s.macs[self.nic_ids().index(nic_id)]
        return {
            "@odata.id": f"{self.S}/EthernetInterfaces/{nic_id}",
            "@odata.type": "#EthernetInterface.v1_4_0.EthernetInterface",
            "Id": nic_id,
            "Name": "System Ethernet Interface",
            "Description": "Integrated NIC 1 Port " + nic_id.split("-")[1],
            "MACAddress": mac,
            "PermanentMACAddress": mac,
            "SpeedMbps": 10000,
            "LinkStatus": "LinkUp",
            "Status": {"State": "Enabled", "Health": "OK"},
        }

    def gpu_ids(self) -> list[str]:
        return [f"{59 + 71 * i}-0" for i in range(self.s.spec.gpus)]

    def gpu(self, gpu_id: str) -> Doc:
        index = self.gpu_ids().index(gpu_id)
        return {
            "@odata.id": f"{self.pcie_base}/{gpu_id}",
            "@odata.type": "#PCIeDevice.v1_4_0.PCIeDevice",
            "Id": gpu_id,
            "Name": f"NVIDIA {GPU_MODEL}",
            "Description": "3D controller",
            "Manufacturer": "NVIDIA Corporation",
            "Model": GPU_MODEL,
            "DeviceType": "SingleFunction",
            "SerialNumber": f"032101{index:07d}",
            "PartNumber": "900-2G500-0000-000",
            "FirmwareVersion": "88.00.48.00.02",
            "Status": {"State": "Enabled", "Health": "OK"},
        }

    def manager(self) -> Doc:
        s, p = self.s, self.p
        doc: Doc = {
            "@odata.id": self.M,
            "@odata.type": "#Manager.v1_3_3.Manager" if p.name == "idrac8" else "#Manager.v1_10_0.Manager",
            "Id": p.manager_id,
            "Name": "Manager",
            "ManagerType": "BMC",
            "Model": p.manager_model,
            "FirmwareVersion": p.firmware,
            "UUID": s.uuid,
            "Status": {"State": "Enabled", "Health": "OK"},
            "Links": {"ManagerForServers": [ref(self.S)], "ManagerForChassis": [ref(self.C)]},
            "Actions": {
                "#Manager.Reset": {
                    "target": f"{self.M}/Actions/Manager.Reset",
                    "ResetType@Redfish.AllowableValues": list(p.manager_reset_types),
                }
            },
        }
        if p.vm_location in ("manager", "both") and s.spec.virtual_media:
            doc["VirtualMedia"] = ref(f"{self.M}/VirtualMedia")
        if p.dell:
            oem_links: Doc = {
                "@odata.type": f"#DellOem.{self.dell_oem_version}.DellOemLinks",
                "Jobs": ref(f"{self.M}/Jobs"),
            }
            if p.dell_services:
                oem_links.update(
                    DelliDRACCardService=ref(f"{self.dell_base}/DelliDRACCardService"),
                    DellJobService=ref(f"{self.dell_base}/DellJobService"),
                    DellLCService=ref(f"{self.dell_base}/DellLCService"),
                )
            doc["Links"]["Oem"] = {"Dell": oem_links}
            # OEM action keys: iDRAC8 (and early iDRAC9) firmware writes "OemManager.v1_0_0#OemManager.X",
            # current iDRAC9 firmware the DSP0266 form "#OemManager.X"; sushy matches both by suffix.
            key = "OemManager.v1_0_0#OemManager." if p.name == "idrac8" else "#OemManager."
            base = f"{self.M}/Actions/Oem"
            doc["Actions"]["Oem"] = {
                f"{key}ImportSystemConfiguration": {
                    "target": f"{base}/EID_674_Manager.ImportSystemConfiguration",
                    "ShutdownType@Redfish.AllowableValues": ["Graceful", "Forced", "NoReboot"],
                    "ShareParameters": {"Target@Redfish.AllowableValues": ["ALL", "IDRAC", "BIOS", "NIC", "RAID"]},
                },
                f"{key}ExportSystemConfiguration": {
                    "target": f"{base}/EID_674_Manager.ExportSystemConfiguration",
                    "ExportFormat@Redfish.AllowableValues": ["XML", "JSON"],
                    "ExportUse@Redfish.AllowableValues": ["Default", "Clone", "Replace"],
                    "IncludeInExport@Redfish.AllowableValues": [
                        "Default",
                        "IncludeReadOnly",
                        "IncludePasswordHashValues",
                    ],
                    "ShareParameters": {"Target@Redfish.AllowableValues": ["ALL", "IDRAC", "BIOS", "NIC", "RAID"]},
                },
            }
        return doc

    def vm_collection(self, path: str) -> Callable[[], Doc]:
        return lambda: collection(
            path,
            "VirtualMediaCollection.VirtualMediaCollection",
            "Virtual Media Services",
            [f"{self.vm_base}/{sid}" for sid in self.s.slots],
        )

    def vm_slot(self, sid: str) -> Doc:
        slot = self.s.slots[sid]
        path = f"{self.vm_base}/{sid}"
        return {
            "@odata.id": path,
            "@odata.type": "#VirtualMedia.v1_2_0.VirtualMedia"
            if self.p.name == "idrac8"
            else "#VirtualMedia.v1_4_0.VirtualMedia",
            "Id": sid,
            "Name": "Virtual CD" if "CD" in slot.media_types else "Virtual Removable Disk",
            "MediaTypes": list(slot.media_types),
            "Image": slot.image,
            "ImageName": slot.image.rsplit("/", 1)[-1] if slot.image else None,
            "Inserted": slot.inserted,
            "WriteProtected": slot.write_protected,
            "ConnectedVia": "URI" if slot.inserted else "NotConnected",
            "Actions": {
                "#VirtualMedia.InsertMedia": {"target": f"{path}/Actions/VirtualMedia.InsertMedia"},
                "#VirtualMedia.EjectMedia": {"target": f"{path}/Actions/VirtualMedia.EjectMedia"},
            },
        }

    def chassis(self) -> Doc:
        p = self.p
        doc: Doc = {
            "@odata.id": self.C,
            # The Chassis-level PCIeDevices link is newer than Chassis v1_9 (v1_10_0+): a BMC that lists
            # its PCIe devices under the Chassis (iDRAC9, newer BMCs) declares a version of the era of
            # its ComputerSystem v1_13_0 / Manager v1_10_0; iDRAC8 (PCIe under the System) keeps v1_6_0.
            "@odata.type": "#Chassis.v1_14_0.Chassis" if p.pcie_under_chassis else "#Chassis.v1_6_0.Chassis",
            "Id": p.chassis_id,
            "Name": "Computer System Chassis",
            "ChassisType": "RackMount",
            "Manufacturer": p.manufacturer,
            "Model": p.model,
            "SerialNumber": self.s.serial,
            "AssetTag": self.s.bios.get("AssetTag", ""),
            "PowerState": self.s.power_state,
            "Status": {"State": "Enabled", "Health": "OK"},
            "Links": {"ComputerSystems": [ref(self.S)], "ManagedBy": [ref(self.M)]},
        }
        if p.pcie_under_chassis:
            doc["PCIeDevices"] = ref(self.pcie_base)
        return doc

    def task_service(self) -> Doc:
        return {
            "@odata.id": f"{R}/TaskService",
            "@odata.type": "#TaskService.v1_1_1.TaskService",
            "Id": "TaskService",
            "Name": "Task Service",
            "ServiceEnabled": True,
            "Tasks": ref(f"{R}/TaskService/Tasks"),
        }

    def jobs_collection(self, expand: bool) -> Doc:
        path = f"{self.M}/Jobs"
        doc = collection(path, "DellJobCollection.DellJobCollection", "JobQueue", [f"{path}/{j}" for j in self.s.jobs])
        if expand:
            doc["Members"] = [self.job(j) for j in self.s.jobs]
        return doc

    def job(self, jid: str) -> Doc:
        job = self.s.job_view(self.s.jobs[jid])
        doc = {k: v for k, v in job.items() if k != "created"}
        doc.update({"@odata.id": f"{self.M}/Jobs/{jid}", "@odata.type": "#DellJob.v1_0_0.DellJob"})
        return doc

    def task(self, jid: str) -> Doc:
        job = self.s.job_view(self.s.jobs[jid])
        state = {"Completed": "Completed", "Failed": "Exception"}.get(job["JobState"], "Running")
        return {
            "@odata.id": f"{R}/TaskService/Tasks/{jid}",
            "@odata.type": "#Task.v1_4_2.Task",
            "Id": jid,
            "Name": job["Name"],
            "TaskState": state,
            "TaskStatus": "OK" if state != "Exception" else "Critical",
            "PercentComplete": job["PercentComplete"],
            "Messages": [
                {"MessageId": f"{self.p.dell_prefix}{job['MessageId']}", "Message": job["Message"], "MessageArgs": []}
            ],
            "Oem": {
                "Dell": {
                    "@odata.type": "#DellJob.v1_0_0.DellJob",
                    "JobState": job["JobState"],
                    "JobType": job["JobType"],
                    "Id": jid,
                }
            },
        }

    def idrac_card_service(self) -> Doc:
        path = f"{self.dell_base}/DelliDRACCardService"
        return {
            "@odata.id": path,
            "@odata.type": "#DelliDRACCardService.v1_1_0.DelliDRACCardService",
            "Id": "DelliDRACCardService",
            "Name": "DelliDRACCardService",
            "Actions": {
                "#DelliDRACCardService.iDRACReset": {
                    "target": f"{path}/Actions/DelliDRACCardService.iDRACReset",
                    "Force@Redfish.AllowableValues": ["Force", "Graceful"],
                }
            },
        }

    def lc_service(self) -> Doc:
        path = f"{self.dell_base}/DellLCService"
        return {
            "@odata.id": path,
            "@odata.type": "#DellLCService.v1_1_0.DellLCService",
            "Id": "DellLCService",
            "Name": "DellLCService",
            "Actions": {
                "#DellLCService.GetRemoteServicesAPIStatus": {
                    "target": f"{path}/Actions/DellLCService.GetRemoteServicesAPIStatus"
                }
            },
        }

    def job_service(self) -> Doc:
        path = f"{self.dell_base}/DellJobService"
        return {
            "@odata.id": path,
            "@odata.type": "#DellJobService.v1_1_0.DellJobService",
            "Id": "Job Service",
            "Name": "DellJobService",
            "Actions": {"#DellJobService.DeleteJobQueue": {"target": f"{path}/Actions/DellJobService.DeleteJobQueue"}},
        }

    # ================================================================= PATCH
    def patch(self, path: str, body: Doc) -> Reply:
        s = self.s
        if path == self.S:
            return self.patch_system(body)
        if path == f"{self.S}/Bios/Settings":
            return self.patch_bios(body)
        if self.p.boot_sources and path == f"{self.S}/BootSources/Settings":
            return self.patch_boot_sources(body)
        if self.get(path, "") is None:
            raise s.error("ResourceNotFound")
        raise s.error("OperationNotAllowed", status=405)

    def patch_system(self, body: Doc) -> Reply:
        s, p = self.s, self.p
        unknown = set(body) - {"Boot", "AssetTag"}
        if unknown:
            raise s.error("PropertyNotWritable", text=f"The properties {sorted(unknown)} cannot be changed.")
        if "AssetTag" in body:
            # DMTF ComputerSystem: AssetTag is a read-write "string or null"; null clears it (rendered ""
            # here, as iDRACs do), any other type is refused.
            tag = body["AssetTag"]
            if tag is not None and not isinstance(tag, str):
                raise s.error("PropertyValueTypeError", text=f"The value {tag!r} for AssetTag is not a string.")
            s.bios["AssetTag"] = tag or ""
        boot = body.get("Boot", {})
        if not isinstance(boot, dict):
            raise s.error("PropertyValueNotInList", text="Boot must be an object.")
        known = {
            "BootSourceOverrideTarget",
            "BootSourceOverrideEnabled",
            "BootSourceOverrideMode",
            "UefiTargetBootSourceOverride",
            "BootOrder",
        }
        if set(boot) - known:
            raise s.error("PropertyNotWritable", text=f"The properties {sorted(set(boot) - known)} cannot be changed.")
        target = boot.get("BootSourceOverrideTarget")
        enabled = boot.get("BootSourceOverrideEnabled")
        mode = boot.get("BootSourceOverrideMode")
        if target is not None and target not in p.boot_targets:
            raise s.error(
                "PropertyValueNotInList",
                text=f"The value {target!r} for BootSourceOverrideTarget is not in the list of acceptable values.",
            )
        if enabled is not None and enabled not in ("Once", "Continuous", "Disabled"):
            raise s.error(
                "PropertyValueNotInList",
                text=f"The value {enabled!r} for BootSourceOverrideEnabled is not in the list of acceptable values.",
            )
        if mode is not None:
            if mode not in ("UEFI", "Legacy"):
                raise s.error(
                    "PropertyValueNotInList",
                    text=f"The value {mode!r} for BootSourceOverrideMode is not in the list of acceptable values.",
                )
            current_mode = "UEFI" if s.bios["BootMode"] == "Uefi" else "Legacy"
            if not p.mode_writable and mode != current_mode:
                # 13G: the mode is the BIOS attribute BootMode (SYS410/SYS444, community.general#5091).
                raise s.error(
                    "PropertyNotWritable",
                    text="BootSourceOverrideMode is read-only here; change the BIOS attribute BootMode with a job.",
                )
        order = boot.get("BootOrder")
        if order is not None:
            if not p.boot_order:
                raise s.error(
                    "PropertyNotWritable", text="The property BootOrder is not supported; use BootSources/Settings."
                )
            if not isinstance(order, list) or sorted(order) != sorted(BOOT_OPTIONS):
                raise s.error(
                    "PropertyValueNotInList",
                    text=f"BootOrder must list every boot option exactly once: {sorted(BOOT_OPTIONS)}.",
                )
        # All checks passed: apply.
        reply_headers: dict[str, str] = {}
        if target is not None:
            s.override_target = target
            if enabled is None and target != "None" and s.override_enabled == "Disabled":
                s.override_enabled = "Once"
        if enabled is not None:
            s.override_enabled = enabled
        if "UefiTargetBootSourceOverride" in boot:
            s.uefi_target = boot["UefiTargetBootSourceOverride"]
        if mode is not None:
            wanted = "Uefi" if mode == "UEFI" else "Bios"
            if p.mode_queues_job:
                # Dell 14G+: every BootSourceOverrideMode in a PATCH queues a BIOS job (ironcore-dev/metal-operator#81).
                s.pending_bios["BootMode"] = wanted
                job = self._bios_job_or_existing()
                reply_headers["Location"] = f"{self.M}/Jobs/{job['Id']}"
                s.counters["mode_job"] += 1
            else:
                s.bios["BootMode"] = wanted
        if order is not None:
            if p.boot_order_pending:
                s.pending_boot_order = list(order)
                if p.dell:
                    job = self._bios_job_or_existing()
                    reply_headers["Location"] = f"{self.M}/Jobs/{job['Id']}"
            else:
                s.boot_options_order = list(order)
        s.counters["patch_system"] += 1
        return Reply(200, self.system(), reply_headers)

    def _bios_job_or_existing(self) -> dict[str, Any]:
        for job in self.s.jobs.values():
            if job["JobType"] == "BIOSConfiguration" and job["JobState"] == "Scheduled":
                return job
        return self.s.create_job("BIOSConfiguration", "Configure: BIOS.Setup.1-1", f"{self.S}/Bios/Settings")

    def patch_bios(self, body: Doc) -> Reply:
        s, p = self.s, self.p
        attributes = body.get("Attributes")
        if not isinstance(attributes, dict) or not attributes:
            raise s.error("PropertyValueNotInList", text="Attributes must be a non-empty object.")
        unknown = set(attributes) - set(s.bios)
        if unknown:
            raise s.error("PropertyValueNotInList", text=f"Unknown BIOS attributes: {sorted(unknown)}.")
        if "BootMode" in attributes and attributes["BootMode"] not in ("Uefi", "Bios"):
            raise s.error("PropertyValueNotInList", text="BootMode must be Uefi or Bios.")
        for name in ENABLED_DISABLED_ATTRIBUTES:
            if name in attributes and attributes[name] not in ("Enabled", "Disabled"):
                raise s.error("PropertyValueNotInList", text=f"{name} must be Enabled or Disabled.")
        s.pending_bios.update(attributes)
        apply_time = (body.get("@Redfish.SettingsApplyTime") or {}).get("ApplyTime")
        headers: dict[str, str] = {}
        if apply_time and p.bios_apply_times:
            if apply_time not in p.bios_apply_times:
                raise s.error("PropertyValueNotInList", text=f"ApplyTime {apply_time!r} is not supported.")
            if apply_time == "Immediate":
                s.bios.update(s.pending_bios)
                s.pending_bios = {}
            elif p.dell:
                job = self._bios_job_or_existing()
                headers["Location"] = f"{self.M}/Jobs/{job['Id']}"
                return Reply(202, None, headers)
        return Reply(200, self.bios_settings(), headers)

    def patch_boot_sources(self, body: Doc) -> Reply:
        s = self.s
        attributes = body.get("Attributes")
        if not isinstance(attributes, dict) or not attributes:
            raise s.error("PropertyValueNotInList", text="Attributes must be a non-empty object.")
        for key, entries in attributes.items():
            devices = {"BootSeq": LEGACY_DEVICES, "UefiBootSeq": UEFI_DEVICES}.get(key)
            if devices is None:
                raise s.error(
                    "PropertyValueNotInList", text=f"Unknown boot sequence {key!r}; use BootSeq or UefiBootSeq."
                )
            names = {name for name, _unused in devices}
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                raise s.error("PropertyValueNotInList", text=f"{key} must be a list of boot source objects.")
            given = [_seq_name(e) for e in entries]
            if sorted(n for n in given if n) != sorted(names) or len(given) != len(names):
                raise s.error(
                    "PropertyValueNotInList", text=f"{key} must list every boot source exactly once: {sorted(names)}."
                )
            current = {e["Name"]: e for e in s.boot_seq[key]}
            new = []
            for position, (entry, name) in enumerate(zip(entries, given, strict=True)):
                index = entry.get("Index", position)
                new.append({**current[name], "Index": int(index), "Enabled": bool(entry.get("Enabled", True))})
            new.sort(key=lambda e: e["Index"])
            for i, e in enumerate(new):
                e["Index"] = i
            s.pending_boot_seq[key] = new
        s.counters["patch_boot_sources"] += 1
        return Reply(200, self.boot_sources_settings())

    # ================================================================== POST
    def post(self, path: str, body: Doc) -> Reply:  # noqa: PLR0911
        s, p = self.s, self.p
        if path == f"{self.S}/Actions/ComputerSystem.Reset":
            return s.reset_system(body.get("ResetType"))
        if path == f"{self.M}/Actions/Manager.Reset":
            if body.get("ResetType") not in p.manager_reset_types:
                raise s.error(
                    "ActionParameterValueNotInList", text=f"ResetType {body.get('ResetType')!r} is not allowed."
                )
            return Reply(204, None, {"X-Lab-Manager-Reset": "1"})
        if p.dell_services and path == f"{self.dell_base}/DelliDRACCardService/Actions/DelliDRACCardService.iDRACReset":
            if body.get("Force") not in ("Force", "Graceful"):
                raise s.error("ActionParameterValueNotInList", text="Force must be Force or Graceful.")
            s.counters["dell_idrac_reset"] += 1
            return Reply(
                200, _dell_ok(p.dell_prefix, "RAC064", "iDRAC was successfully reset."), {"X-Lab-Manager-Reset": "1"}
            )
        if (
            p.dell_services
            and path == f"{self.dell_base}/DellLCService/Actions/DellLCService.GetRemoteServicesAPIStatus"
        ):
            ready = "Ready" if s.lc_ready() else "NotReady"
            return Reply(200, {"LCStatus": ready, "RTStatus": ready, "ServerStatus": "OutOfPOST", "Status": ready})
        if p.dell_services and path == f"{self.dell_base}/DellJobService/Actions/DellJobService.DeleteJobQueue":
            return self.delete_jobs(str(body.get("JobID", "")))
        if p.dell and path == f"{self.M}/Jobs":
            return self.create_bios_job(body)
        if p.dell and path == f"{self.M}/Actions/Oem/EID_674_Manager.ImportSystemConfiguration":
            return self.scp_import(body)
        if p.dell and path == f"{self.M}/Actions/Oem/EID_674_Manager.ExportSystemConfiguration":
            raise s.error("ActionNotSupported", status=501, text="SCP export is not emulated.")
        if path.startswith(self.vm_base + "/") and path.endswith("/Actions/VirtualMedia.EjectMedia"):
            sid = path[len(self.vm_base) + 1 :].split("/", 1)[0]
            if sid in s.slots:
                return self.eject(sid)
        if path == f"{R}/SessionService/Sessions":
            return s.login(body.get("UserName"), body.get("Password"))
        if self.get(path, "") is None:
            raise s.error("ResourceNotFound")
        raise s.error("OperationNotAllowed", status=405)

    def insert_target(self, path: str) -> str | None:
        """The slot id if ``path`` is an InsertMedia action target."""
        if path.startswith(self.vm_base + "/") and path.endswith("/Actions/VirtualMedia.InsertMedia"):
            sid = path[len(self.vm_base) + 1 :].split("/", 1)[0]
            return sid if sid in self.s.slots else None
        return None

    def check_insert(self, sid: str, body: Doc) -> str:
        """Validate an InsertMedia request before the image fetch; returns the image URL."""
        s, p = self.s, self.p
        image = body.get("Image")
        if not image or not isinstance(image, str):
            raise s.error("ActionParameterMissing")
        scheme = urlsplit(image).scheme.lower()
        if scheme not in ("http", "https", "nfs", "cifs", "smb"):
            raise s.error("ActionParameterValueNotInList", text=f"The image URL scheme {scheme!r} is not supported.")
        for key in ("TransferProtocolType", "TransferMethod"):
            allowed = {"TransferProtocolType": ("HTTP", "HTTPS", "NFS", "CIFS"), "TransferMethod": ("Stream", "Upload")}
            if key in body and body[key] not in allowed[key]:
                raise s.error("ActionParameterValueNotInList", text=f"{key} {body[key]!r} is not supported.")
        if s.fire("insert_sys446") is not None:
            raise s.error("SYS446")
        if s.fire("insert_vrm0021_until_reset") is not None:
            raise s.error("VRM0021")
        slot = s.slots[sid]
        if slot.inserted:
            if p.dell:
                raise s.error("VRM0012")
            raise s.error("ResourceInUse")
        if p.name == "idrac8" and any(o.inserted for o in s.slots.values()):
            raise s.error("VRM0021")  # iDRAC8: one image at a time across CD and RemovableDisk
        return image

    def finish_insert(self, sid: str, body: Doc, image: str, fetch_error: str | None) -> Reply:
        s = self.s
        if fetch_error is not None:
            s.counters["insert_unreachable"] += 1
            if s.p.dell:
                raise s.error("RAC0904")
            raise s.error("InternalError", text=f"Unable to access the image {image}: {fetch_error}")
        slot = s.slots[sid]
        slot.inserted = bool(body.get("Inserted", True))
        slot.image = image
        slot.write_protected = bool(body.get("WriteProtected", True))
        s.counters["insert_media"] += 1
        s.media_changed(sid)
        return Reply(204)

    def eject(self, sid: str) -> Reply:
        s = self.s
        s.counters["eject_media"] += 1
        if s.fire("eject_stuck_until_reset") is not None:
            return Reply(204)  # accepted, but the media stays (redhat-performance/jetlag#657)
        slot = s.slots[sid]
        was_inserted = slot.inserted
        slot.inserted, slot.image = False, None
        if was_inserted:
            s.media_changed(sid)
        return Reply(204)

    def create_bios_job(self, body: Doc) -> Reply:
        s = self.s
        target = str(body.get("TargetSettingsURI", ""))
        if target != f"{self.S}/Bios/Settings":
            raise s.error(
                "ActionParameterValueNotInList",
                text=f"TargetSettingsURI {target!r} is not supported; use {self.S}/Bios/Settings.",
            )
        for job in s.jobs.values():
            if job["JobType"] == "BIOSConfiguration" and job["JobState"] == "Scheduled":
                raise s.error("GeneralError", text="BIOS configuration job already exists.")
        if not s.has_pending_bios():
            raise s.error("GeneralError", text="No pending data present to create a Configuration job.")
        job = s.create_job("BIOSConfiguration", "ConfigBIOS:BIOS.Setup.1-1", target)
        return Reply(
            200,
            _dell_ok(self.p.dell_prefix, "SUP001", "Successfully created job."),
            {"Location": f"{self.M}/Jobs/{job['Id']}"},
        )

    def delete_jobs(self, jid: str) -> Reply:
        s = self.s
        if jid in ("JID_CLEARALL", "JID_CLEARALL_FORCE"):
            s.jobs.clear()
            s.pending_bios, s.pending_boot_seq, s.pending_boot_order = {}, {}, None
            return Reply(200, _dell_ok(self.p.dell_prefix, "SUP020", "Successfully deleted the job queue."))
        if jid not in s.jobs:
            raise s.error("ResourceNotFound")
        del s.jobs[jid]
        return Reply(200, _dell_ok(self.p.dell_prefix, "SUP020", "Successfully deleted the job."))

    def scp_import(self, body: Doc) -> Reply:
        s = self.s
        share = body.get("ShareParameters") or {}
        target = share.get("Target")
        targets = target if isinstance(target, list) else [target]
        # sushy >= 5.7 sends ["ALL"], older clients "ALL"; which one a real iDRAC8 accepts is unverified.
        if not targets or not all(t in ("ALL", "IDRAC", "BIOS", "NIC", "RAID") for t in targets):
            raise s.error("ActionParameterValueNotInList", text=f"ShareParameters.Target {target!r} is not supported.")
        shutdown = body.get("ShutdownType", "Graceful")
        if shutdown not in ("Graceful", "Forced", "NoReboot"):
            raise s.error("ActionParameterValueNotInList", text=f"ShutdownType {shutdown!r} is not supported.")
        buffer = body.get("ImportBuffer")
        if not isinstance(buffer, str):
            raise s.error("ActionParameterMissing", text="The action requires the parameter ImportBuffer.")
        try:
            values = parse_scp_buffer(buffer)
        except ValueError as exc:
            raise s.error("GeneralError", text=str(exc)) from exc
        if s.fire("scp_job_running") is not None:
            raise s.error("RAC0679")
        fqdd = self.p.manager_id
        boot_once = values.get(f"{fqdd}/ServerBoot.1#BootOnce")
        first = values.get(f"{fqdd}/ServerBoot.1#FirstBootDevice")
        if boot_once is not None or first is not None:
            s.scp_boot = {"BootOnce": boot_once or "Disabled", "FirstBootDevice": first or ""}
        s.scp_imports.append({"target": target, "shutdown_type": shutdown, "values": values})
        s.counters["scp_import"] += 1
        job = s.create_job("ImportConfiguration", "Import Configuration", None, state="Running")
        return Reply(202, None, {"Location": f"{R}/TaskService/Tasks/{job['Id']}"})

    # ================================================================ DELETE
    def delete(self, path: str) -> Reply:
        s, p = self.s, self.p
        parent, _unused, leaf = path.rpartition("/")
        if parent == f"{R}/SessionService/Sessions":
            return s.logout(leaf)
        if p.dell and parent == f"{self.M}/Jobs":
            if leaf == "JID_CLEARALL_FORCE" and not p.dell_services:
                # The emulator's choice for 13G: no bulk clear, delete jobs one by one (badfish's fallback).
                raise s.error("GeneralError", text="JID_CLEARALL_FORCE is not supported; delete the jobs one by one.")
            return self.delete_jobs(leaf)
        if self.get(path, "") is None:
            raise s.error("ResourceNotFound")
        raise s.error("OperationNotAllowed", status=405)


def _seq_name(entry: Doc) -> str | None:
    """A BootSeq entry's device name, from ``Name`` or from ``Id`` (``BIOS.Setup.1-1#BootSeq#<name>#<hash>``)."""
    if entry.get("Name"):
        return str(entry["Name"])
    parts = str(entry.get("Id", "")).split("#")
    return parts[2] if len(parts) > 2 else None


def _dell_ok(prefix: str, code: str, text: str) -> Doc:
    return {
        "@Message.ExtendedInfo": [
            {
                "MessageId": f"{prefix}{code}",
                "Message": text,
                "Severity": "Informational",
                "MessageArgs": [],
                "Resolution": "No response action is required.",
            }
        ]
    }


__all__ = ["BmcError", "R", "Tree"]
