"""iDRAC8 quirks that need no BMC: the OEM extension from an already-read Manager, the SCP task state, the
persistent order the next POST applies."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import RedfishError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks.dell_idrac8 import (
    DellIdrac8,
    dell_manager_extension,
    scp_task_state,
)

MANAGER_PATH = "/redfish/v1/Managers/iDRAC.Embedded.1"
IMPORT_URI = f"{MANAGER_PATH}/Actions/Oem/EID_674_Manager.ImportSystemConfiguration"
MANAGER_JSON = {
    "@odata.id": MANAGER_PATH,
    "Id": "iDRAC.Embedded.1",
    "Model": "13G Monolithic",
    "Actions": {
        "Oem": {
            "OemManager.v1_0_0#OemManager.ImportSystemConfiguration": {
                "target": IMPORT_URI,
                "ShutdownType@Redfish.AllowableValues": ["Graceful", "Forced", "NoReboot"],
            }
        }
    },
}


class _NoHttp:
    """A connector that fails the test on any request."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the OEM extension made an HTTP call ({name})")


def test_dell_extension_is_parsed_from_the_manager_already_read() -> None:
    manager = type(
        "Manager",
        (),
        {"path": MANAGER_PATH, "json": MANAGER_JSON, "redfish_version": "1.4.0", "registries": {}, "root": None},
    )()
    client = type("Client", (), {"manager": manager, "connector": _NoHttp()})()
    extension = dell_manager_extension(client)
    assert extension.import_system_configuration_uri == IMPORT_URI


class _Reply:
    def __init__(self, body: Any, content: bytes = b"{}") -> None:
        self.body, self.content = body, content

    def json(self) -> Any:
        if isinstance(self.body, Exception):
            raise self.body
        return self.body


@pytest.mark.parametrize(
    ("reply", "state"),
    [
        (_Reply({"TaskState": "Completed"}), "Completed"),
        (_Reply({"TaskState": "Exception", "TaskStatus": "Critical"}), "Exception"),
        (_Reply({"Oem": {"Dell": {"JobState": "Failed"}}}), "Failed"),
        (_Reply({}), None),
        (_Reply(None, content=b""), None),
        (_Reply(ValueError("not JSON")), None),
        (_Reply(["a list"]), None),
    ],
)
def test_scp_task_state(reply: _Reply, state: str | None) -> None:
    assert scp_task_state(reply) == state


# ------------------------------------------------------------------------------ persistent order
SYSTEM_PATH = "/redfish/v1/Systems/System.Embedded.1"
DISK_FIRST = ["HardDisk.List.1-1", "NIC.Integrated.1-1-1", "Optical.iDRACVirtual.1-1"]
CD_FIRST = ["Optical.iDRACVirtual.1-1", "HardDisk.List.1-1", "NIC.Integrated.1-1-1"]


def _seq(names: list[str]) -> list[dict[str, Any]]:
    return [
        {"Enabled": True, "Id": f"BIOS.Setup.1-1#BootSeq#{n}#0", "Index": i, "Name": n} for i, n in enumerate(names)
    ]


class _Bmc:
    """GETs by path; ``pending=None``: the Settings resource is not served (404)."""

    def __init__(self, current: list[str], pending: list[str] | None, job: str | None) -> None:
        self.docs: dict[str, Any] = {
            f"{SYSTEM_PATH}/Bios": {"Attributes": {"BootMode": "Bios"}},
            f"{SYSTEM_PATH}/BootSources": {"Attributes": {"BootSeq": _seq(current)}},
            f"{MANAGER_PATH}/Jobs": {"Members": [{"Id": "JID_1", "JobType": "BIOSConfiguration", "JobState": job}]}
            if job
            else {"Members": []},
        }
        if pending is not None:
            self.docs[f"{SYSTEM_PATH}/BootSources/Settings"] = {
                "Attributes": {"BootSeq": _seq(pending)} if pending else {}
            }
        self.manager = type("Manager", (), {"path": MANAGER_PATH})()

    def system_path(self) -> str:
        return SYSTEM_PATH

    def get_json(self, path: str, _what: str) -> Any:
        if path not in self.docs:
            raise RedfishError(f"GET {path}: 404 Not Found")
        return self.docs[path]


@pytest.mark.parametrize(
    ("current", "pending", "job", "read", "pending_read"),
    [
        pytest.param(CD_FIRST, [], None, CD_FIRST, False, id="nothing pending: the current order"),
        # a teardown restored the disk first and powered off: the next POST applies it, so that is the order
        pytest.param(CD_FIRST, DISK_FIRST, "Scheduled", DISK_FIRST, True, id="a scheduled job: the pending order"),
        # written but never committed by a job (a run killed between the PATCH and the job): the next POST keeps it
        pytest.param(CD_FIRST, DISK_FIRST, None, CD_FIRST, False, id="pending without a job: the current order"),
        pytest.param(CD_FIRST, DISK_FIRST, "Completed", CD_FIRST, False, id="the job already ran"),
        pytest.param(DISK_FIRST, None, "Scheduled", DISK_FIRST, False, id="no Settings resource: the current order"),
    ],
)
def test_the_order_read_is_the_one_the_next_post_applies(
    current: list[str], pending: list[str] | None, job: str | None, read: list[str], pending_read: bool
) -> None:
    state = DellIdrac8().read_boot_order(_Bmc(current, pending, job))
    assert state.order == read
    assert ("pending" in state.source) is pending_read
    assert [e["Name"] for e in state.raw["entries"]] == read  # a write starts from what was read
