"""Inputs shared by the boot_iso tests: a valid host, and helpers to look inside a built ISO."""

from __future__ import annotations

import io
from typing import Any

import pycdlib

from ansible_collections.metalplane.inference.plugins.module_utils._metal import host_settings, hostkeys

# A syntactically valid sha512-crypt hash (not of any real password).
ROOT_HASH = "$6$metalplane$" + "A" * 86
AUTHORIZED_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKv0ql3rV7FQ1Cq5xQ9e2dM0wB9aT4n8c3y7cR1zX6pE operator@controller"
HOST_KEY = hostkeys.generate_host_key("root@r730")


def params(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "os_family": "el",
        "hostname": "r730",
        "network": {
            "mac": "24:6E:96:0A:1B:2C",
            "address": "192.168.120.70/24",
            "gateway": "192.168.120.1",
            "dns": ["192.168.120.1", "9.9.9.9"],
        },
        "disk": {"wwn": "0x5000C500A1B2C3D4"},
        "ssh_authorized_keys": [AUTHORIZED_KEY],
        "root_password_hash": ROOT_HASH,
        "cluster_name": "r730-lab",
        "generation": 3,
    }
    base.update(overrides)
    return base


def settings(**overrides: Any) -> host_settings.HostSettings:
    return host_settings.host_settings(params(**overrides))


class IsoReader:
    """Open a built ISO with pycdlib and read files by Rock Ridge path."""

    def __init__(self, path: Any) -> None:
        self.iso = pycdlib.PyCdlib()
        self.iso.open(str(path))

    def read(self, rr_path: str) -> bytes:
        out = io.BytesIO()
        self.iso.get_file_from_iso_fp(out, rr_path=rr_path)
        return out.getvalue()

    def text(self, rr_path: str) -> str:
        return self.read(rr_path).decode()

    def entries(self) -> list[tuple[int, Any]]:
        catalog = self.iso.eltorito_boot_catalog
        found = [(catalog.validation_entry.platform_id, catalog.initial_entry)]
        for section in catalog.sections:
            found += [(section.platform_id, entry) for entry in section.section_entries]
        return found

    def extent(self, rr_path: str) -> int:
        return self.iso.get_record(rr_path=rr_path).extent_location()

    def close(self) -> None:
        self.iso.close()
