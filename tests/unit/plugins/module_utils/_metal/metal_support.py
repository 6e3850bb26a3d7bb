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
# A valid 580 installer's checksum (of no real file) and the node-software fields of a valid metal_preflight cluster
# entry (V100s: the proprietary module, branch 580, EL 10). The private key file only has to exist: the preflight
# never reads it, so this very file stands in for it.
DRIVER_SHA = "ef" * 32
NODE_SOFTWARE: dict[str, Any] = {
    "ssh_private_key_file": __file__,
    "os_version": "10",
    "nvidia_driver_installer_url": "https://us.download.nvidia.com/tesla/580.105.08/NVIDIA-Linux-x86_64-580.105.08.run",
    "nvidia_driver_installer_sha256": f"sha256:{DRIVER_SHA}",
    "nvidia_driver_version": None,
    "nvidia_driver_kernel_module_type": "auto",
    "kubeadm_node_kubernetes_version": "v1.34.2",
    "kubeadm_node_pod_cidr": "10.244.0.0/16",
    "kubeadm_node_service_cidr": "10.96.0.0/12",
    "kubeadm_node_api_port": 6443,
    "kubeadm_node_labels": {"example.com/rack": "r12"},
    "kubeadm_node_lb_pool": ["192.168.120.200-192.168.120.210"],
}


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
