"""The emulators that ``labctl`` starts, and what each one publishes in ``endpoints.yml``.

Each entry names a module (``lab.<platform>.server``, run with ``python -m``) that follows the contract
in ``lab.common.emulator``.
``endpoint(host, port, state_dir)`` returns the entry written under ``emulators.<name>`` in
``inventories/lab/.state/endpoints.yml``: URLs, lab credentials and kubeconfig paths that the lab
inventory reads. Lab credentials are fixed, well-known test values: the lab is loopback only.

An emulator that checks its platform's contract (``contract_report``) writes the report there and
answers ``GET /lab/contract``; ``labctl status`` shows it and ``labctl down`` fails on a violation.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.common.emulator import TESTS_DIR
from lab.vultr.contract import CONTRACT_REPORT as VULTR_CONTRACT_REPORT
from lab.vultr.contract import OVERLAY as VULTR_OVERLAY

# Where the vultr emulator keeps its files (its --state-dir below labctl's) and its contract report.
VULTR_STATE = "vultr"
CONTRACT_PATH = "/lab/contract"  # the control endpoint of an emulator that checks a contract

EndpointFn = Callable[[str, int, Path], dict[str, Any]]
ArgsFn = Callable[[Path], list[str]]


def _no_args(_state_dir: Path) -> list[str]:
    return []


@dataclass(frozen=True)
class Emulator:
    name: str
    endpoint: EndpointFn
    module: str  # what labctl runs with ``python -m``
    extra_args: ArgsFn = _no_args
    # Files the emulator writes once it is ready to serve (besides accepting TCP connections).
    ready_files: Callable[[Path], list[Path]] = field(default=lambda _state_dir: [])
    # The contract report the emulator writes when it checks its platform's API contract (the file
    # exists only then); labctl removes it before a start and reads it on status and down.
    contract_report: Callable[[Path], Path] | None = None
    # More lines for ``labctl status`` (state dir, port) -> lines, e.g. the simulated hosts behind the BMCs.
    status_lines: Callable[[Path, int], list[str]] | None = None

    @property
    def script(self) -> Path:
        """The module's file (labctl records it with each process it starts)."""
        return TESTS_DIR.joinpath(*self.module.split(".")).with_suffix(".py")


def _artifacts_endpoint(host: str, port: int, state_dir: Path) -> dict[str, Any]:
    from lab.common.artifacts import VENDOR_ISOS

    iso = state_dir / "artifacts" / "installer.iso"
    vendor = {
        shape: {
            "url": f"http://{host}:{port}/{name}",
            "sha256": hashlib.sha256((state_dir / "artifacts" / name).read_bytes()).hexdigest(),
        }
        for name, shape in VENDOR_ISOS.items()
        if (state_dir / "artifacts" / name).is_file()
    }
    return {
        "base_url": f"http://{host}:{port}",
        "installer_iso": {
            "url": f"http://{host}:{port}/{iso.name}",
            "sha256": hashlib.sha256(iso.read_bytes()).hexdigest(),
        },
        # Vendor-shaped installer ISOs (lab.common.artifacts.VENDOR_ISOS), absent without `make bootloaders`.
        "installer_isos": vendor,
        # The stand-in NVIDIA .run installer (lab.metal.driver), as the nvidia_driver role downloads it.
        "nvidia_driver": _nvidia_driver(host, port, state_dir),
    }


def _nvidia_driver(host: str, port: int, state_dir: Path) -> dict[str, Any]:
    from lab.common.artifacts import NVIDIA_DIR
    from lab.metal.driver import DRIVER_VERSION, installer_name

    path = state_dir / "artifacts" / NVIDIA_DIR / installer_name(DRIVER_VERSION)
    if not path.is_file():
        return {}
    return {
        "url": f"http://{host}:{port}/{NVIDIA_DIR}/{path.name}",
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "version": DRIVER_VERSION,
    }


_said: set[str] = set()


def _say_once(key: str, message: str) -> None:
    """A note on stderr the first time only (labctl may start an emulator several times)."""
    if key not in _said:
        _said.add(key)
        print(f"labctl: {message}", file=sys.stderr)


def vultr_contract_args(overlay: Path = VULTR_OVERLAY) -> list[str]:
    """``--contract SPEC`` when the overlay spec exists (the reference tree was found); else nothing, said once."""
    if overlay.is_file():
        return ["--contract", str(overlay)]
    _say_once(
        "vultr-contract",
        f"vultr: no contract checking: the Vultr overlay spec is absent at {overlay} "
        "(set METALPLANE_REFERENCE_DIR or check out ../shared)",
    )
    return []


def _vultr_endpoint(host: str, port: int, state_dir: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"api_endpoint": f"http://{host}:{port}", "api_key": "lab-vultr-api-key"}
    if (state_dir / VULTR_STATE / VULTR_CONTRACT_REPORT).is_file():  # written before the emulator listens
        entry["contract_url"] = f"http://{host}:{port}{CONTRACT_PATH}"
    return entry


def _redfish_endpoint(host: str, port: int, state_dir: Path) -> dict[str, Any]:
    entry: dict[str, Any] = __import__("lab.redfish.personality", fromlist=["lab_endpoint"]).lab_endpoint(
        host, port, state_dir
    )
    hosts = state_dir / "metal-hosts.json"
    if hosts.is_file():
        described = json.loads(hosts.read_text())
        entry["hosts"] = described["hosts"]
        entry["ssh_key"] = described.get("ssh_key") or {}
    return entry


# Registered emulators, in start order. Each later issue adds its own entry.
EMULATORS: tuple[Emulator, ...] = (
    Emulator(
        name="artifacts",
        endpoint=_artifacts_endpoint,
        module="lab.common.artifacts",
        ready_files=lambda state_dir: [state_dir / "artifacts" / "installer.iso"],
    ),
    # Vultr API v2 (VKE) emulator: api_endpoint follows vultr.cloud's convention (no /v2; the client
    # appends it), the key is the emulator's fixed lab key (lab.vultr.server.DEFAULT_API_KEY).
    # With the overlay spec, every exchange is checked against it (--contract): endpoints.yml then
    # publishes contract_url, which the lab's verify reads.
    Emulator(
        name="vultr",
        endpoint=_vultr_endpoint,
        module="lab.vultr.server",
        # Issue 6: each VKE cluster gets a workload Kubernetes API (lab.vultr.twin).
        extra_args=lambda state_dir: [
            "--workload-clusters",
            "--state-dir",
            str(state_dir / VULTR_STATE),
            *vultr_contract_args(),
        ],
        contract_report=lambda state_dir: state_dir / VULTR_STATE / VULTR_CONTRACT_REPORT,
    ),
    # Kubernetes API emulator (HTTPS + token): clients use the kubeconfig it writes (the token lives
    # only there); seeded like a small VKE L40S cluster (2 GPU nodes with DRA ResourceSlices).
    Emulator(
        name="kube",
        endpoint=lambda host, port, state_dir: {
            "kubeconfig": str(state_dir / "kube-lab.kubeconfig"),
            "url": f"https://{host}:{port}",
        },
        module="lab.kube.server",
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
    # clients verify TLS with the CA it writes (ca.pem). Endpoint shape: lab.redfish.personality.
    # Behind every BMC a simulated server (lab.metal) reachable over SSH once installed;
    # metal-hosts.json says where (published under ``hosts`` in endpoints.yml).
    Emulator(
        name="redfish",
        endpoint=_redfish_endpoint,
        module="lab.redfish.server",
        extra_args=lambda _state_dir: ["--metal-hosts"],
        ready_files=lambda state_dir: [state_dir / "ca.pem", state_dir / "metal-hosts.json"],
        status_lines=lambda state_dir, port: __import__("lab.metal.fleet", fromlist=["status_lines"]).status_lines(
            state_dir, port
        ),
    ),
    # Modelplane control plane (issue 6): a Kubernetes API with the Modelplane CRDs and a simulated
    # controller (lab.modelplane.server); the kubeconfig is written once the CRDs are served.
    Emulator(
        name="modelplane",
        endpoint=lambda _host, _port, state_dir: {"kubeconfig": str(state_dir / "modelplane.kubeconfig")},
        module="lab.modelplane.server",
        ready_files=lambda state_dir: [state_dir / "modelplane.kubeconfig"],
    ),
)
