"""The lab's NVIDIA driver: the stand-in ``.run`` (its header's options), and the shims a node's driver meets.

The handlers run against a fake host (a real ``Disk`` in a temporary directory, a set of loaded modules, a BMC's
GPUs and BIOS); the package database is a fake in the shape ``lab.metal.packages`` offers.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lab.metal import driver
from lab.metal.driver import (
    DRIVER_VERSION,
    InstallerUsage,
    build_installer,
    installer_name,
    modules_at_boot,
    parse_installer_args,
)
from lab.metal.sandbox import Disk
from lab.redfish.bmc import GPU_MODEL

KERNEL = driver.running_kernel()
HEADERS = f"linux-headers-{KERNEL}"
ALL_PACKAGES = {HEADERS, "gcc", "make", "dkms"}


@dataclass
class FakeHost:
    disk: Disk
    name: str = "r730-1"
    directory: Path = Path("/nonexistent")
    modules: set[str] = field(default_factory=set)
    gpu_models: list[str] = field(default_factory=lambda: [GPU_MODEL] * 2)
    address: str = "127.77.0.2"
    boot_id: str = "boot-1"
    bmc: Any = field(default_factory=lambda: SimpleNamespace(bios={"SecureBoot": "Disabled"}))


@dataclass
class FakePackages:
    present: set[str] = field(default_factory=lambda: set(ALL_PACKAGES))
    active: set[str] = field(default_factory=set)

    def installed(self, _host: Any, name: str) -> str | None:
        return "1.0" if name in self.present else None

    def service_active(self, _host: Any, unit: str) -> bool:
        return unit in self.active


@pytest.fixture
def packages(monkeypatch: pytest.MonkeyPatch) -> FakePackages:
    fake = FakePackages()
    monkeypatch.setattr(driver, "_packages", fake)
    return fake


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    disk = Disk(tmp_path / "disk")
    disk.ensure()
    return FakeHost(disk=disk)


# ------------------------------------------------------------------------------------------ options
@pytest.mark.parametrize(
    ("argv", "options"),
    [
        (["--silent", "--dkms", "--kernel-module-type=proprietary"],
         {"silent": True, "dkms": True, "kernel-module-type": "proprietary"}),
        (["-s", "-k", "6.12.0-55.el10.x86_64"], {"silent": True, "kernel-name": "6.12.0-55.el10.x86_64"}),
        (["--kernel-module-type", "open", "--no-questions", "--ui=none"],
         {"kernel-module-type": "open", "no-questions": True, "ui": "none"}),
    ],
)  # fmt: skip
def test_installer_options_as_nvgetopt_reads_them(argv: list[str], options: dict[str, Any]) -> None:
    assert parse_installer_args(argv).options == options


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sillent"], 'Unrecognized option: "--sillent"'),
        (["--kernel-module-type=gsp"], 'Invalid kernel module type "gsp"'),
        (["--kernel-name"], "requires an argument"),
        (["--silent=yes"], "does not take an argument"),
        (["install"], 'Unrecognized option: "install"'),
        (["--ui=gtk"], 'Invalid value "gtk"'),
    ],
)
def test_installer_refuses_what_the_real_one_refuses(argv: list[str], message: str) -> None:
    with pytest.raises(InstallerUsage, match=message):
        parse_installer_args(argv)


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("run") / installer_name()
    return path, build_installer(path)


def _sh(run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(run), *args], capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize(
    ("args", "rc", "output"),
    [
        (["--check"], 0, "Verifying archive integrity... OK"),
        (["--info"], 0, f"Linux-x86_64 {DRIVER_VERSION}"),
        (["--silent", "--dkms", "--no-such-flag"], 1, 'Unrecognized option: "--no-such-flag"'),
        (["--list"], 0, f"NVIDIA-Linux-x86_64-{DRIVER_VERSION}/nvidia-installer"),
    ],
)
def test_run_file_header(run_file: tuple[Path, str], args: list[str], rc: int, output: str) -> None:
    done = _sh(run_file[0], *args)
    assert done.returncode == rc, done.stderr
    assert output in done.stdout + done.stderr


def test_run_file_extracts_the_payload_and_is_reproducible(run_file: tuple[Path, str], tmp_path: Path) -> None:
    path, sha256 = run_file
    assert _sh(path, "--extract-only", "--target", str(tmp_path)).returncode == 0
    top = tmp_path / f"NVIDIA-Linux-x86_64-{DRIVER_VERSION}"
    assert (top / "nvidia-installer").is_file()
    assert "kernel module type open" in (top / "kernel-open" / "dkms.conf").read_text()
    assert build_installer(tmp_path / "again.run") == sha256  # the same bytes for the same version


def test_a_corrupted_run_file_fails_its_check(run_file: tuple[Path, str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.run"
    blob = bytearray(run_file[0].read_bytes())
    blob[-40] ^= 0xFF
    broken.write_bytes(bytes(blob))
    assert _sh(broken, "--check").returncode == 1


# ---------------------------------------------------------------------------------- nvidia-installer
INSTALL = ["nvidia-installer", DRIVER_VERSION, "--silent", "--dkms", "--kernel-module-type=proprietary"]


@pytest.mark.parametrize(
    ("missing", "modules", "argv", "message"),
    [
        ({"gcc"}, set(), INSTALL, "development tool `cc`"),
        ({"make"}, set(), INSTALL, "development tool `make`"),
        ({HEADERS}, set(), INSTALL, "kernel source tree"),
        ({"dkms"}, set(), INSTALL, "dkms"),
        (set(), {"nouveau"}, INSTALL, "Nouveau kernel driver is currently in use"),
        (set(), set(), [*INSTALL[:2], "--dkms"], "run with --silent"),
        (set(), set(), [*INSTALL[:4], "--kernel-module-type=open"], "does not drive Volta"),
        (set(), set(), [*INSTALL, "--frobnicate"], "Unrecognized option"),
    ],
)
def test_installer_refuses(
    *, host: FakeHost, packages: FakePackages, missing: set[str], modules: set[str], argv: list[str], message: str
) -> None:
    packages.present -= missing
    host.modules |= modules
    effect = driver.installer_shim(argv, host)
    assert effect.rc == 1
    assert message in effect.stderr


def test_installer_refuses_under_secure_boot(host: FakeHost, packages: FakePackages) -> None:
    host.bmc.bios["SecureBoot"] = "Enabled"
    effect = driver.installer_shim(INSTALL, host)
    assert (effect.rc, "Key was rejected" in effect.stderr) == (1, True)


def test_installer_answers_the_plan(host: FakeHost, packages: FakePackages) -> None:
    effect = driver.installer_shim(INSTALL, host)
    assert effect.rc == 0, effect.stderr
    assert f"VERSION='{DRIVER_VERSION}'" in effect.stdout
    assert "TYPE='proprietary'" in effect.stdout
    assert "DKMS='1'" in effect.stdout
    assert "LOAD='1'" in effect.stdout


def test_installer_for_another_kernel_loads_nothing(host: FakeHost, packages: FakePackages) -> None:
    packages.present.add("linux-headers-9.9.9-lab")
    effect = driver.installer_shim([*INSTALL, "--kernel-name=9.9.9-lab"], host)
    assert "LOAD='0'" in effect.stdout
    assert "KERNEL='9.9.9-lab'" in effect.stdout


def test_installer_refuses_while_the_old_module_is_in_use(host: FakeHost, packages: FakePackages) -> None:
    _install(host)
    host.modules.add("nvidia")
    packages.active.add("nvidia-persistenced")
    assert "appears to be already loaded" in driver.installer_shim(INSTALL, host).stderr
    packages.active.clear()
    effect = driver.installer_shim(INSTALL, host)  # not in use: the installer unloads it
    assert (effect.rc, effect.action, effect.target) == (0, "unload", "nvidia")


# -------------------------------------------------------------------------------------- dkms, modprobe, smi
def _install(host: FakeHost, version: str = DRIVER_VERSION, flavour: str = "proprietary") -> None:
    host.disk.write(
        f"/usr/src/nvidia-{version}/dkms.conf", driver.DKMS_CONF.format(version=version, flavour=flavour).encode()
    )
    for action in ("add", "build", "install"):
        effect = driver.dkms_shim(["dkms", action, "-m", "nvidia", "-v", version, "-k", KERNEL], host)
        assert effect.rc == 0, effect.stderr


def test_dkms_build_needs_headers_and_status_reports_it(host: FakeHost, packages: FakePackages) -> None:
    host.disk.write(f"/usr/src/nvidia-{DRIVER_VERSION}/dkms.conf", b"# metal-lab: kernel module type proprietary\n")
    assert driver.dkms_shim(["dkms", "add", "-m", "nvidia", "-v", DRIVER_VERSION], host).rc == 0
    packages.present.discard(HEADERS)
    built = driver.dkms_shim(["dkms", "build", "-m", "nvidia", "-v", DRIVER_VERSION, "-k", KERNEL], host)
    assert built.rc == 1
    assert "kernel headers" in built.stderr
    assert driver.dkms_shim(["dkms", "status"], host).stdout == f"nvidia/{DRIVER_VERSION}: added\n"
    packages.present.add(HEADERS)
    assert driver.dkms_shim(["dkms", "autoinstall", "-k", KERNEL], host).rc == 0
    status = driver.dkms_shim(["dkms", "status"], host).stdout
    assert status == f"nvidia/{DRIVER_VERSION}, {KERNEL}, x86_64: installed\n"
    assert driver.installed_module(host) == {"version": DRIVER_VERSION, "flavour": "proprietary", "dkms": True}


@pytest.mark.parametrize(
    ("installed", "modules", "secure", "rc", "message"),
    [
        (False, set(), False, 1, "Module nvidia not found"),
        (True, {"nouveau"}, False, 1, "No such device"),
        (True, set(), True, 1, "Key was rejected"),
        (True, set(), False, 0, ""),
    ],
)
def test_modprobe_nvidia(
    *, host: FakeHost, packages: FakePackages, installed: bool, modules: set[str], secure: bool, rc: int, message: str
) -> None:
    if installed:
        _install(host)
    host.modules |= modules
    host.bmc.bios["SecureBoot"] = "Enabled" if secure else "Disabled"
    effect = driver.modprobe_shim(["modprobe", "nvidia"], host)
    assert effect.rc == rc
    assert message in effect.stderr
    if rc == 0:
        assert (effect.action, effect.target) == ("load", "nvidia")


def test_modprobe_leaves_other_modules_to_the_generic_shim(host: FakeHost) -> None:
    assert driver.modprobe_shim(["modprobe", "br_netfilter"], host).action == "load"


def test_nvidia_smi_answers_only_while_nvidia_is_loaded(host: FakeHost, packages: FakePackages) -> None:
    from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.driver_version import (
        parse_smi,
        parse_smi_xml,
    )

    _install(host)
    assert driver.nvidia_smi_shim(["nvidia-smi"], host).rc == 9
    host.modules.add("nvidia")
    report = parse_smi_xml(driver.nvidia_smi_shim(["nvidia-smi", "-q", "-x"], host).stdout)
    assert str(report.driver_version) == DRIVER_VERSION
    assert [(g.name, g.memory_total_mib, g.pci_device_id) for g in report.gpus] == [(GPU_MODEL, 16384, "1db4")] * 2
    banner = parse_smi(driver.nvidia_smi_shim(["nvidia-smi"], host).stdout)
    assert [g.bus_id for g in banner.gpus] == [g.bus_id for g in report.gpus]
    assert "<persistence_mode>Disabled" in driver.nvidia_smi_shim(["nvidia-smi", "-q", "-x"], host).stdout
    assert driver.nvidia_smi_shim(["nvidia-smi", "-pm", "1"], host).rc == 0
    assert "<persistence_mode>Enabled" in driver.nvidia_smi_shim(["nvidia-smi", "-q", "-x"], host).stdout
    host.boot_id = "boot-2"  # persistence mode set by nvidia-smi does not survive a reboot
    assert "<persistence_mode>Disabled" in driver.nvidia_smi_shim(["nvidia-smi", "-q", "-x"], host).stdout


@pytest.mark.parametrize(
    ("blacklist", "rebuilt", "installed", "expected"),
    [
        (False, False, False, {"nouveau"}),
        (True, False, False, set()),  # written by the OS installer: in the installed initramfs
        (True, True, True, {"nvidia"}),
        (False, True, True, {"nouveau"}),
    ],
)
def test_modules_at_boot(
    *, host: FakeHost, packages: FakePackages, blacklist: bool, rebuilt: bool, installed: bool, expected: set[str]
) -> None:
    if blacklist:
        host.disk.write("/etc/modprobe.d/blacklist-nouveau.conf", b"blacklist nouveau\noptions nouveau modeset=0\n")
    if rebuilt:
        assert driver.initramfs_shim(["update-initramfs", "-u"], host).rc == 0
    if installed:
        _install(host)
    assert modules_at_boot(host) == expected


def test_a_blacklist_written_after_the_initramfs_waits_for_a_rebuild(host: FakeHost) -> None:
    driver.initramfs_shim(["dracut", "-f"], host)
    host.disk.write("/etc/modprobe.d/blacklist-nouveau.conf", b"blacklist nouveau\n")
    assert modules_at_boot(host) == {"nouveau"}
    driver.initramfs_shim(["dracut", "-f"], host)
    assert modules_at_boot(host) == set()


@pytest.mark.parametrize(
    ("argv", "stdout"),
    [(["mokutil", "--sb-state"], "SecureBoot disabled\n"), (["lsmod"], "Module                  Size  Used by\n")],
)
def test_read_only_shims(host: FakeHost, argv: list[str], stdout: str) -> None:
    assert getattr(driver, f"{argv[0]}_shim")(argv, host).stdout == stdout
