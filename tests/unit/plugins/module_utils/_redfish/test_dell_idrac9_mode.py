"""iDRAC9 boot mode: the BIOS job the PATCH queued is found in its ``Location`` (ironcore-dev/metal-operator#81)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks.dell_idrac9 import (
    DellIdrac9,
    job_id_from,
)


class _Response:
    def __init__(self, headers: dict[str, str] | None) -> None:
        self.headers = headers


@pytest.mark.parametrize(
    ("headers", "job_id"),
    [
        ({"Location": "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_123456789012"}, "JID_123456789012"),
        ({"Location": "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_1/"}, "JID_1"),
        ({"Location": "/redfish/v1/TaskService/Tasks/7"}, None),  # not a Dell job
        ({}, None),
        (None, None),
    ],
)
def test_job_id_from(headers: dict[str, str] | None, job_id: str | None) -> None:
    assert job_id_from(_Response(headers)) == job_id


class _Client:
    def __init__(self, system: dict[str, Any], location: str) -> None:
        self.system_doc = system
        self.location = location
        self.patches: list[tuple[str, dict[str, Any], str | None]] = []

    def system_path(self) -> str:
        return "/redfish/v1/Systems/System.Embedded.1"

    def get_with_etag(self, path: str, _doing: str) -> tuple[dict[str, Any], str | None]:
        return self.system_doc, '"etag-1"'

    def patch(self, path: str, data: dict[str, Any], _doing: str, etag: str | None = None) -> _Response:
        self.patches.append((path, data, etag))
        return _Response({"Location": self.location})


def test_set_boot_mode_returns_the_job_and_sends_the_etag() -> None:
    client = _Client({"Boot": {"BootSourceOverrideMode": "UEFI"}}, "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_9")
    done = DellIdrac9().set_boot_mode(client, "Legacy")
    assert done == {"method": "BootSourceOverrideMode", "mode": "Legacy", "job_id": "JID_9"}
    assert client.patches == [
        ("/redfish/v1/Systems/System.Embedded.1", {"Boot": {"BootSourceOverrideMode": "Legacy"}}, '"etag-1"')
    ]
