"""iDRAC8 quirks that need no BMC: the OEM extension from an already-read Manager, the SCP task state."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks.dell_idrac8 import (
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
