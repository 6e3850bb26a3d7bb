"""The emulators that ``labctl`` starts, and what each one publishes in ``endpoints.yml``.

Each entry names a script ``tests/lab/<name>.py`` that follows the contract in ``lab.common``.
``endpoint(host, port, state_dir)`` returns the entry written under ``emulators.<name>`` in
``inventories/lab/.state/endpoints.yml``: URLs, lab credentials and kubeconfig paths that the lab
inventory reads. Lab credentials are fixed, well-known test values: the lab is loopback only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LAB_DIR = Path(__file__).resolve().parent

EndpointFn = Callable[[str, int, Path], dict[str, Any]]
ArgsFn = Callable[[Path], list[str]]


def _no_args(_state_dir: Path) -> list[str]:
    return []


@dataclass(frozen=True)
class Emulator:
    name: str
    endpoint: EndpointFn
    extra_args: ArgsFn = _no_args
    # Files the emulator writes once it is ready to serve (besides accepting TCP connections).
    ready_files: Callable[[Path], list[Path]] = field(default=lambda _state_dir: [])

    @property
    def script(self) -> Path:
        return LAB_DIR / f"{self.name}.py"


def _artifacts_endpoint(host: str, port: int, state_dir: Path) -> dict[str, Any]:
    iso = state_dir / "artifacts" / "installer.iso"
    return {
        "base_url": f"http://{host}:{port}",
        "installer_iso": {
            "url": f"http://{host}:{port}/{iso.name}",
            "sha256": hashlib.sha256(iso.read_bytes()).hexdigest(),
        },
    }


# Registered emulators, in start order. Each later issue adds its own entry.
EMULATORS: tuple[Emulator, ...] = (
    Emulator(
        name="artifacts",
        endpoint=_artifacts_endpoint,
        ready_files=lambda state_dir: [state_dir / "artifacts" / "installer.iso"],
    ),
    # Vultr API v2 (VKE) emulator: api_endpoint follows vultr.cloud's convention (no /v2; the client
    # appends it), the key is the emulator's fixed lab key (lab.vultr.DEFAULT_API_KEY).
    Emulator(
        name="vultr",
        endpoint=lambda host, port, _state_dir: {
            "api_endpoint": f"http://{host}:{port}",
            "api_key": "lab-vultr-api-key",
        },
        # Issue 6: each VKE cluster gets a workload Kubernetes API (lab.vke_twin).
        extra_args=lambda state_dir: ["--workload-clusters", "--state-dir", str(state_dir / "vultr")],
    ),
    # Kubernetes API emulator (HTTPS + token): clients use the kubeconfig it writes (the token lives
    # only there); seeded like a small VKE L40S cluster (2 GPU nodes with DRA ResourceSlices).
    Emulator(
        name="kube",
        endpoint=lambda host, port, state_dir: {
            "kubeconfig": str(state_dir / "kube-lab.kubeconfig"),
            "url": f"https://{host}:{port}",
        },
        extra_args=lambda _state_dir: [
            "--gpu-nodes",
            "2",
            "--gpu-product",
            "NVIDIA-L40S",
            "--dra",
            "--operator-ready-after",
            "5",
        ],
        ready_files=lambda state_dir: [state_dir / "kube-lab.kubeconfig"],
    ),
    # Redfish BMC emulator: one HTTPS port, one path prefix per BMC (iDRAC8 R730, iDRAC9, generic);
    # clients verify TLS with the CA it writes (ca.pem). Endpoint shape: lab.redfish_personality.
    Emulator(
        name="redfish",
        endpoint=lambda host, port, state_dir: __import__(
            "lab.redfish_personality", fromlist=["lab_endpoint"]
        ).lab_endpoint(host, port, state_dir),
        ready_files=lambda state_dir: [state_dir / "ca.pem"],
    ),
    # Modelplane control plane (issue 6): a Kubernetes API with the Modelplane CRDs and a simulated
    # controller (lab.modelplane); the kubeconfig is written once the CRDs are served.
    Emulator(
        name="modelplane",
        endpoint=lambda _host, _port, state_dir: {"kubeconfig": str(state_dir / "modelplane.kubeconfig")},
        ready_files=lambda state_dir: [state_dir / "modelplane.kubeconfig"],
    ),
)
