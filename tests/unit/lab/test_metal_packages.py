"""The package and service shims of a simulated host (lab.metal.packages), driven directly with a fake host.

And ``node_packages``' converge step run against them: the module's parsers read the shims' output, so a shim
that drifted from the real tool's format (or a module that asks something the real tool would not answer) fails
here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._node.packages_run import converge
from lab.metal import packages
from lab.metal.packages import CATALOGUE, KERNEL, installed, seed, service_active
from lab.metal.sandbox import Disk
from lab.metal.shims import HANDLERS, Effect

K8S_DEB = "https://pkgs.k8s.io/core:/stable:/v1.34/deb/"
K8S_RPM = "https://pkgs.k8s.io/core:/stable:/v1.34/rpm/"
KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGMHoXcBEADlabkey\n-----END PGP PUBLIC KEY BLOCK-----\n"
DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
ROCKY = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.5"\n'


@dataclass
class FakeHost:
    """What a ShimHost offers, over a real Disk in a temporary directory."""

    directory: Path
    name: str = "r730-1"
    modules: set[str] = field(default_factory=set)
    boot_id: str = "boot-1"
    address: str = "127.77.0.10"
    gpu_models: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.disk = Disk(self.directory / "disk")
        self.disk.ensure()


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


def run(host: FakeHost, line: str | list[str]) -> Effect:
    argv = line.split() if isinstance(line, str) else line
    return HANDLERS[argv[0]][1](argv, host)


def apt_repo(host: FakeHost, url: str = K8S_DEB, *, key: bool = True) -> None:
    signed = "[signed-by=/etc/apt/keyrings/kubernetes.asc] " if key else ""
    host.disk.write("/etc/apt/sources.list.d/kubernetes.list", f"deb {signed}{url} /\n".encode())
    if key:
        host.disk.write("/etc/apt/keyrings/kubernetes.asc", KEY)


# ------------------------------------------------------------------------------------------------- apt
def test_every_shim_is_registered_under_usr_bin() -> None:
    for command in ("apt-get", "apt-cache", "dpkg-query", "dnf", "rpm", "systemctl"):
        assert HANDLERS[command] == ("bin", getattr(packages, command.replace("-", "_")))


def test_kubernetes_appears_only_after_its_repository_and_apt_get_update(host: FakeHost) -> None:
    assert run(host, "apt-cache madison kubelet").stdout == ""
    apt_repo(host)
    assert run(host, "apt-cache madison kubelet").stdout == ""  # apt reads its lists, not the sources
    assert run(host, "apt-get update -q").rc == 0
    madison = run(host, "apt-cache madison kubelet").stdout.splitlines()
    assert madison[0] == "   kubelet | 1.34.2-1.1 | https://pkgs.k8s.io/core:/stable:/v1.34/deb  Packages"
    assert [line.split(" | ")[1].strip() for line in madison] == ["1.34.2-1.1", "1.34.1-1.1", "1.34.0-1.1"]
    assert run(host, "apt-cache madison make").stdout == (
        "      make |    4.3-4.1 | http://deb.debian.org/debian bookworm/main amd64 Packages\n"
    )


@pytest.mark.parametrize(
    ("url", "key", "stderr"),
    [
        (K8S_DEB, False, "NO_PUBKEY"),  # no signed-by and no trusted key
        ("https://pkgs.k8s.io/core:/stable:/v1.29/deb/", True, "does not have a Release file"),  # not offered
        ("https://example.invalid/debian/", True, "does not have a Release file"),
        (K8S_RPM, True, "does not have a Release file"),  # the rpm tree is no apt repository
    ],
)
def test_apt_get_update_fails_as_apt_does(host: FakeHost, url: str, key: bool, stderr: str) -> None:
    apt_repo(host, url, key=key)
    effect = run(host, "apt-get update")
    assert effect.rc == 100
    assert stderr in effect.stderr


@pytest.mark.parametrize(
    ("line", "rc", "text"),
    [
        ("apt-get install -y kubelet=1.34.9-1.1", 100, "E: Version '1.34.9-1.1' for 'kubelet' was not found"),
        ("apt-get install -y nvidia-magic", 100, "E: Unable to locate package nvidia-magic"),
        ("apt-get install kubelet=1.34.2-1.1", 1, "Do you want to continue? [Y/n] Abort."),
        ("apt-get install -y --frobnicate kubelet", 100, "E: Command line option '--frobnicate' is not understood"),
        ("apt-get dist-upgrade -y", 100, "E: Invalid operation dist-upgrade"),
        ("apt-cache policy kubelet", 100, "not simulated"),
    ],
)
def test_apt_refusals(host: FakeHost, line: str, rc: int, text: str) -> None:
    apt_repo(host)
    run(host, "apt-get update")
    effect = run(host, line)
    assert (effect.rc, text in effect.stdout + effect.stderr) == (rc, True)
    assert installed(host, "kubelet") is None


def test_apt_install_upgrade_downgrade_and_remove(host: FakeHost) -> None:
    apt_repo(host)
    run(host, "apt-get update")
    assert run(host, "apt-get install -y -q kubelet=1.34.1-1.1 kubectl").rc == 0
    assert (installed(host, "kubelet"), installed(host, "kubectl")) == ("1.34.1-1.1", "1.34.2-1.1")
    assert run(host, "apt-get install -y kubelet=1.34.2-1.1").rc == 0
    downgrade = run(host, "apt-get install -y kubelet=1.34.0-1.1")
    assert (downgrade.rc, "without --allow-downgrades" in downgrade.stderr) == (100, True)
    assert run(host, "apt-get install -y --allow-downgrades kubelet=1.34.0-1.1").rc == 0
    assert installed(host, "kubelet") == "1.34.0-1.1"
    assert "already the newest version" in run(host, "apt-get install -y kubectl").stdout
    assert run(host, "apt-get remove -y kubectl").rc == 0
    assert installed(host, "kubectl") is None
    query = run(host, ["dpkg-query", "-W", "-f", "${Package}\\t${db:Status-Abbrev}\\t${Version}\\n", "kubectl", "x"])
    assert (query.rc, query.stdout) == (1, "kubectl\trc \t1.34.2-1.1\n")  # removed, configuration kept
    assert query.stderr == "dpkg-query: no packages found matching x\n"


def test_the_kernel_headers_and_build_tools_are_in_the_debian_archive(host: FakeHost) -> None:
    effect = run(host, f"apt-get install -y linux-headers-{KERNEL} dkms gcc make")
    assert effect.rc == 0, effect.stderr
    assert installed(host, "gcc") == "4:12.2.0-3"
    assert run(host, "dpkg-query -W dkms").stdout == "dkms\t3.0.10-8+deb12u1\n"  # the default format


# ------------------------------------------------------------------------------------------------- dnf
def yum_repo(host: FakeHost, *, key: bool = True) -> None:
    text = f"[kubernetes]\nname=Kubernetes\nbaseurl={K8S_RPM}\nenabled=1\ngpgcheck=1\n"
    if key:
        text += "gpgkey=file:///etc/pki/rpm-gpg/kubernetes.asc\n"
        host.disk.write("/etc/pki/rpm-gpg/kubernetes.asc", KEY)
    host.disk.write("/etc/yum.repos.d/kubernetes.repo", text.encode())


def test_dnf_lists_installs_and_rpm_answers(host: FakeHost) -> None:
    assert run(host, "dnf -q list --showduplicates kubelet").rc == 1
    yum_repo(host)
    listing = run(host, "dnf -q list --showduplicates kubelet").stdout.splitlines()
    assert listing[0] == "Available Packages"
    assert listing[1].split() == ["kubelet.x86_64", "1.34.0-150500.1.1", "kubernetes"]
    assert run(host, "dnf install kubelet-1.34.2-150500.1.1").rc == 1  # no -y: the prompt is aborted
    assert run(host, "dnf install -y kubelet-1.34.2-150500.1.1 kubeadm-1.34.1").rc == 0
    query = run(host, ["rpm", "-q", "--qf", "%{NAME}\\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n", "kubelet", "kubectl"])
    assert (query.rc, query.stdout) == (1, "kubelet\t0:1.34.2-150500.1.1\npackage kubectl is not installed\n")
    assert installed(host, "kubeadm") == "1.34.1-150500.1.1"
    assert run(host, "rpm -q --whatprovides /usr/bin/apt-get").rc == 1  # Ansible's apt flavour check
    assert "No match for argument: dkms" in run(host, "dnf install -y dkms").stdout  # dkms is in EPEL
    assert run(host, "dnf remove -y kubeadm").rc == 0
    assert installed(host, "kubeadm") is None


def test_dnf_checks_the_repository_key_file(host: FakeHost) -> None:
    yum_repo(host, key=True)
    host.disk.host_path("/etc/pki/rpm-gpg/kubernetes.asc").unlink()
    effect = run(host, "dnf install -y kubelet")
    assert (effect.rc, "GPG check FAILED" in effect.stderr) == (1, True)


# ------------------------------------------------------------------------------------------------ systemctl
def test_a_deb_package_enables_and_starts_its_unit_and_kubelet_crashloops_until_configured(host: FakeHost) -> None:
    apt_repo(host)
    run(host, "apt-get update")
    assert not service_active(host, "kubelet")
    run(host, "apt-get install -y kubelet=1.34.2-1.1 containerd")
    assert service_active(host, "containerd")
    assert run(host, "systemctl is-enabled kubelet").stdout == "enabled\n"
    show = dict(line.split("=", 1) for line in run(host, "systemctl show kubelet").stdout.splitlines())
    assert (show["LoadState"], show["ActiveState"], show["SubState"]) == ("loaded", "activating", "auto-restart")
    assert not service_active(host, "kubelet.service")
    host.disk.write("/var/lib/kubelet/config.yaml", b"kind: KubeletConfiguration\n")  # what kubeadm init writes
    assert service_active(host, "kubelet")


def test_an_rpm_package_leaves_its_unit_disabled(host: FakeHost) -> None:
    yum_repo(host)
    run(host, "dnf install -y kubelet")
    host.disk.write("/var/lib/kubelet/config.yaml", b"")
    assert run(host, "systemctl is-enabled kubelet.service").stdout == "disabled\n"
    assert not service_active(host, "kubelet")
    assert run(host, "systemctl enable --now kubelet").rc == 0
    assert service_active(host, "kubelet")


@pytest.mark.parametrize(
    ("line", "rc", "stdout", "stderr"),
    [
        ("systemctl is-active nvidia-persistenced", 3, "inactive\n", ""),
        ("systemctl is-enabled nvidia-persistenced", 1, "", "Failed to get unit file state for nvidia-persistenced"),
        ("systemctl start kubelet", 5, "", "Failed to start kubelet.service: Unit kubelet.service not found."),
        ("systemctl enable kubelet", 1, "", "Unit file kubelet.service does not exist."),
        ("systemctl status kubelet", 4, "", "could not be found"),
        ("systemctl --user start kubelet", 1, "", "Failed to connect to bus"),
        ("systemctl frobnicate kubelet", 1, "", "Unknown command verb frobnicate."),
        ("systemctl daemon-reload", 0, "", ""),
        ("systemctl is-system-running", 0, "running\n", ""),
    ],
)
def test_systemctl_without_the_unit(host: FakeHost, line: str, rc: int, stdout: str, stderr: str) -> None:
    effect = run(host, line)
    assert (effect.rc, effect.stdout) == (rc, stdout)
    assert stderr in effect.stderr


def test_systemctl_show_of_a_missing_unit_is_what_systemd_service_reads_as_not_found(host: FakeHost) -> None:
    show = dict(line.split("=", 1) for line in run(host, "systemctl show kubelet").stdout.splitlines())
    assert show["LoadState"] == "not-found"
    assert show["LoadError"].startswith("org.freedesktop.systemd1.NoSuchUnit")
    assert run(host, "systemctl show -p ActiveState --value kubelet").stdout == "inactive\n"


UNIT = b"[Unit]\nDescription=NVIDIA Persistence Daemon\n[Service]\nExecStart=/usr/bin/nvidia-persistenced\n"


@pytest.mark.parametrize(
    ("unit_file", "enabled_after"),
    [(UNIT + b"[Install]\nWantedBy=multi-user.target\n", "enabled\n"), (UNIT, "static\n")],
)
def test_a_unit_file_written_under_etc_is_a_unit(host: FakeHost, unit_file: bytes, enabled_after: str) -> None:
    host.disk.write("/etc/systemd/system/nvidia-persistenced.service", unit_file)
    assert run(host, "systemctl enable nvidia-persistenced").rc == 0
    assert run(host, "systemctl is-enabled nvidia-persistenced").stdout == enabled_after
    assert run(host, "systemctl start nvidia-persistenced").rc == 0
    assert service_active(host, "nvidia-persistenced")
    assert run(host, "systemctl stop nvidia-persistenced").rc == 0
    assert not service_active(host, "nvidia-persistenced")
    assert run(host, "systemctl mask nvidia-persistenced").rc == 0
    assert run(host, "systemctl start nvidia-persistenced").rc == 1


def test_at_a_new_boot_only_enabled_units_run(host: FakeHost) -> None:
    host.disk.write("/etc/systemd/system/a.service", UNIT + b"[Install]\nWantedBy=multi-user.target\n")
    host.disk.write("/etc/systemd/system/b.service", UNIT + b"[Install]\nWantedBy=multi-user.target\n")
    run(host, "systemctl enable a")
    run(host, "systemctl start a b")
    assert (service_active(host, "a"), service_active(host, "b")) == (True, True)
    host.boot_id = "boot-2"
    assert (service_active(host, "a"), service_active(host, "b")) == (True, False)


def test_seeded_packages_are_installed(host: FakeHost) -> None:
    seed(host, {"kubelet": "1.34.2-1.1", "containerd": "1.6.20~ds1-1+b1"})
    assert installed(host, "kubelet") == "1.34.2-1.1"
    assert run(host, "systemctl is-enabled kubelet").rc == 1  # an image ships them disabled


# ------------------------------------------------------------------------------ node_packages over the shims
class ShimIO:
    """The module's NodeIO over the shims: commands to their handlers, files to the host's disk."""

    def __init__(self, host: FakeHost, os_release: str, keys: Mapping[str, bytes]) -> None:
        self.host, self.os_release, self.keys = host, os_release, keys
        self.commands: list[list[str]] = []

    def run(self, argv: list[str], env: Mapping[str, str]) -> tuple[int, str, str]:
        assert env["DEBIAN_FRONTEND"] == "noninteractive"
        self.commands.append(argv)
        effect = HANDLERS[argv[0]][1](argv, self.host)
        return effect.rc, effect.stdout, effect.stderr

    def read(self, path: str) -> bytes | None:
        return self.os_release.encode() if path == "/etc/os-release" else self.host.disk.read(path)

    def write(self, path: str, content: bytes) -> None:
        self.host.disk.write(path, content)

    def fetch(self, url: str, env: Mapping[str, str]) -> bytes:
        return self.keys[url]


K8S_PARAMS: dict[str, Any] = {
    "packages": ["kubelet=1.34.2", "kubeadm=1.34.2", "kubectl=1.34.2"],
    "state": "present",
    "update_cache": False,
}


@pytest.mark.parametrize(
    "family",
    [
        (DEBIAN, K8S_DEB, f"{K8S_DEB}Release.key", "1.34.2-1.1", "/etc/apt/keyrings/kubernetes.asc"),
        (ROCKY, K8S_RPM, f"{K8S_RPM}repodata/repomd.xml.key", "1.34.2-150500.1.1", "/etc/pki/rpm-gpg/kubernetes.asc"),
    ],
    ids=["debian", "el"],
)
def test_node_packages_installs_kubernetes_and_is_idempotent(
    host: FakeHost, family: tuple[str, str, str, str, str]
) -> None:
    os_release, url, key_url, version, key_path = family
    params = {**K8S_PARAMS, "repositories": [{"name": "kubernetes", "url": url, "key_url": key_url}]}
    io = ShimIO(host, os_release, {key_url: KEY})
    result, warnings = converge(io, params, check_mode=True)
    assert result["changed"] is True
    assert "cannot be looked up" in " ".join(warnings)  # the repository is not written in check mode
    assert (installed(host, "kubelet"), host.disk.read(key_path)) == (None, None)

    result, warnings = converge(io, params, check_mode=False)
    assert (result["changed"], warnings) == (True, [])
    assert result["installed"] == {"kubelet": version, "kubeadm": version, "kubectl": version}
    assert [t["action"] for t in result["transaction"]] == ["install"] * 3
    assert host.disk.read(key_path) == KEY
    assert all(installed(host, name) == version for name in ("kubelet", "kubeadm", "kubectl"))

    again, _warnings = converge(io, params, check_mode=False)
    assert (again["changed"], again["transaction"], again["commands"]) == (False, [], [])


def test_node_packages_names_the_versions_found_when_the_pin_is_not_offered(host: FakeHost) -> None:
    params = {
        **K8S_PARAMS,
        "packages": ["kubelet=1.34.9"],
        "repositories": [{"name": "kubernetes", "url": K8S_DEB, "key_url": "https://k/Release.key"}],
    }
    with pytest.raises(InputError) as caught:
        converge(ShimIO(host, DEBIAN, {"https://k/Release.key": KEY}), params, check_mode=False)
    assert caught.value.field == "packages"
    assert "kubelet=1.34.9: no repository offers it; versions found: 1.34.0-1.1, 1.34.1-1.1, 1.34.2-1.1" in str(
        caught.value
    )
    assert installed(host, "kubelet") is None


def test_node_packages_downgrades_and_removes_over_the_shims(host: FakeHost) -> None:
    repo = [{"name": "kubernetes", "url": K8S_DEB, "key_url": "https://k/Release.key"}]
    io = ShimIO(host, DEBIAN, {"https://k/Release.key": KEY})
    converge(io, {**K8S_PARAMS, "packages": ["kubelet=1.34.2"], "repositories": repo}, check_mode=False)
    result, _warnings = converge(
        io, {**K8S_PARAMS, "packages": ["kubelet=1.34.0"], "repositories": repo}, check_mode=False
    )
    assert result["transaction"] == [
        {"name": "kubelet", "before": "1.34.2-1.1", "after": "1.34.0-1.1", "action": "downgrade"}
    ]
    result, _warnings = converge(io, {**K8S_PARAMS, "packages": ["kubelet"], "state": "absent"}, check_mode=False)
    assert (result["changed"], result["installed"], installed(host, "kubelet")) == (True, {"kubelet": None}, None)


def test_the_catalogue_offers_both_kubernetes_minors_on_both_families() -> None:
    for kind in ("deb", "rpm"):
        for minor in ("1.33", "1.34"):
            assert {"kubelet", "kubeadm", "kubectl", "cri-tools", "kubernetes-cni"} <= set(
                CATALOGUE[kind][f"kubernetes-v{minor}"]
            )
