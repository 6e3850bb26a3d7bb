"""The lab's artifact server: the installer ISO (and later driver installers) that BMCs fetch.

Why: a Redfish ``InsertMedia`` makes the BMC itself download the image, so the lab needs a real
HTTP server holding real files at stable URLs, on loopback like every other emulator. The ISO is
tiny but carries the ISO 9660 signature a BMC checks, and its SHA-256 is published so playbooks
can verify what they boot.

It also serves vendor-shaped installer ISOs (``tests/support/vendor_isos.py``: the Debian 12 netinst
layout), the "vendor ISO" the bare-metal role's ``boot_iso`` downloads and turns into a host's unattended
installer, when the boot loaders they are built from are present (``make bootloaders``).

    python -m lab.common.artifacts --host 127.0.0.1 --port N [--state-dir DIR]
"""

from __future__ import annotations

import functools
import hashlib
import sys
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from lab.common.emulator import LOOPBACK, emulator_arguments, free_port, serve_until_signalled

INSTALLER_ISO = "installer.iso"
# Vendor-shaped installer ISOs (file name -> shape of tests/support/vendor_isos.py), built at start when the
# boot loaders are there; endpoints.yml publishes each under ``installer_isos.<shape>`` with its sha256.
VENDOR_ISOS = {"debian-12-netinst.iso": "debian12"}
# The NVIDIA driver installers (lab.metal.driver's stand-in .run); endpoints.yml publishes
# ``nvidia_driver.{url,sha256,version}``.
NVIDIA_DIR = "nvidia"
# A mirror of pkgs.k8s.io in its upstream layout (``core:/stable:/v<minor>/deb/`` and ``/rpm/``): what a node fetches
# itself is the repository's signing key; the package index is the lab's package shims' (lab.metal.packages), which
# know a Kubernetes repository by this path under any base URL. The lab inventory sets it as
# kubeadm_node_package_repository, as an air-gapped site points it at its own mirror.
KUBERNETES_MIRROR_KEY = (
    b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n"
    b"bWV0YWwtbGFiIHN0YW5kLWluIGtleSBmb3IgdGhlIEt1YmVybmV0ZXMgbWlycm9y\n"
    b"-----END PGP PUBLIC KEY BLOCK-----\n"
)
ISO9660_MAGIC_OFFSET = 0x8001  # the primary volume descriptor's "CD001" identifier
SECTOR = 2048


def make_installer_iso(path: Path) -> str:
    """Write a minimal ISO 9660 image (system area + volume descriptor); return its SHA-256."""
    image = bytearray(16 * SECTOR + SECTOR)
    descriptor = bytearray(SECTOR)
    descriptor[0] = 1  # primary volume descriptor
    descriptor[1:6] = b"CD001"
    descriptor[6] = 1
    descriptor[40:72] = b"METALPLANE_LAB_INSTALLER".ljust(32)
    image[16 * SECTOR : 17 * SECTOR] = descriptor
    assert image[ISO9660_MAGIC_OFFSET : ISO9660_MAGIC_OFFSET + 5] == b"CD001"
    path.write_bytes(bytes(image))
    return hashlib.sha256(image).hexdigest()


def make_vendor_isos(root: Path) -> dict[str, str]:
    """Build the vendor-shaped ISOs into ``root`` (shape -> file name); none without the boot loaders."""
    from support.vendor_isos import BOOTLOADERS, LOADER_FILES, build_shape

    if not all((BOOTLOADERS / name).is_file() for name in LOADER_FILES):
        print(
            f"artifacts: no vendor-shaped ISOs: boot loaders absent at {BOOTLOADERS} (make bootloaders)",
            file=sys.stderr,
        )
        return {}
    built = {}
    for file_name, shape in VENDOR_ISOS.items():
        if not (root / file_name).is_file():
            build_shape(shape, root / file_name)
        built[shape] = file_name
    return built


def make_nvidia_driver(root: Path) -> dict[str, str]:
    """The stand-in NVIDIA ``.run`` installer (``lab.metal.driver``) under ``nvidia/``: its path, version, sha256."""
    from lab.metal.driver import DRIVER_VERSION, build_installer, installer_name

    path = root / NVIDIA_DIR / installer_name(DRIVER_VERSION)
    return {"path": f"{NVIDIA_DIR}/{path.name}", "version": DRIVER_VERSION, "sha256": build_installer(path)}


def make_kubernetes_mirror(root: Path) -> list[str]:
    """The signing key of every Kubernetes minor the lab's package shims offer, at its upstream path under ``root``."""
    from lab.metal.packages import KUBERNETES_PATCHES

    written = []
    for minor in KUBERNETES_PATCHES:
        for kind, key in (("deb", "Release.key"), ("rpm", "repodata/repomd.xml.key")):
            path = root / f"core:/stable:/v{minor}/{kind}/{key}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(KUBERNETES_MIRROR_KEY)
            written.append(str(path.relative_to(root)))
    return written


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


class ArtifactServer:
    """Serves ``root`` over HTTP; usable in-process (tests) or as a lab process."""

    def __init__(self, root: Path | None = None, host: str = LOOPBACK, port: int | None = None) -> None:
        self._tmp = None if root else tempfile.TemporaryDirectory(prefix="mp-artifacts-")
        self.root = root or Path(self._tmp.name)  # type: ignore[union-attr]
        self.root.mkdir(parents=True, exist_ok=True)
        self.vendor_isos = make_vendor_isos(self.root)  # before installer.iso, which labctl waits for
        self.nvidia_driver = make_nvidia_driver(self.root)  # likewise
        make_kubernetes_mirror(self.root)
        self.iso_sha256 = make_installer_iso(self.root / INSTALLER_ISO)
        handler = functools.partial(_QuietHandler, directory=str(self.root))
        self.server = ThreadingHTTPServer((host, port or free_port(host)), handler)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ArtifactServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._tmp:
            self._tmp.cleanup()

    def __enter__(self) -> ArtifactServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def main() -> None:
    args = emulator_arguments(__doc__.splitlines()[0]).parse_args()
    root = (args.state_dir / "artifacts") if args.state_dir else None
    server = ArtifactServer(root, args.host, args.port).start()
    serve_until_signalled(server.stop)


if __name__ == "__main__":
    main()
