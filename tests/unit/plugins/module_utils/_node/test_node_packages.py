"""The node_packages planner: os-release, pins, the package managers' output, repository files, the transaction.

Tool output samples follow the formats the tools document (dpkg-query(1), apt-cache(8) madison, rpm(8) query
formats, dnf(8) list) and what they print on Debian 12 and EL 9 for the upstream Kubernetes repositories.
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError, InputError
from ansible_collections.metalplane.inference.plugins.module_utils._node.packages import (
    APT,
    DNF,
    PackageSpec,
    Repository,
    key_extension,
    missing_message,
    package_family,
    parse_dnf_list,
    parse_dpkg_query,
    parse_madison,
    parse_os_release,
    parse_package_specs,
    parse_repositories,
    parse_rpm_query,
    plan_transaction,
    render_repository,
    transaction_commands,
)

DEBIAN_12 = """\
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
ID=debian
HOME_URL="https://www.debian.org/"
"""
UBUNTU_2404 = 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'
CENTOS_10 = 'NAME="CentOS Stream"\nVERSION="10 (Coughlan)"\nID="centos"\nID_LIKE="rhel fedora"\n'
ROCKY_9 = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.5"\n'
POP = 'NAME="Pop!_OS"\nID=pop\nID_LIKE="ubuntu debian"\n'
ARCH = 'NAME="Arch Linux"\nPRETTY_NAME="Arch Linux"\nID=arch\n'


@pytest.mark.parametrize(
    ("text", "family"),
    [(DEBIAN_12, APT), (UBUNTU_2404, APT), (CENTOS_10, DNF), (ROCKY_9, DNF), (POP, APT)],
)
def test_family_from_os_release(text: str, family: str) -> None:
    assert package_family(parse_os_release(text)) == family


def test_os_release_quoting_and_comments() -> None:
    parsed = parse_os_release("# comment\n\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nX='a b'\n")
    assert parsed == {"PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)", "ID": "debian", "X": "a b"}


@pytest.mark.parametrize("text", [ARCH, ""])
def test_another_os_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ConflictError, match="Debian family"):
        package_family(parse_os_release(text))


@pytest.mark.parametrize(
    ("items", "specs"),
    [
        (["kubelet=1.34.2", "kubeadm"], [PackageSpec("kubelet", "1.34.2"), PackageSpec("kubeadm")]),
        ([" containerd.io = 1.7 "], [PackageSpec("containerd.io", "1.7")]),
        (["linux-headers-6.1.0-28-amd64"], [PackageSpec("linux-headers-6.1.0-28-amd64")]),
        (["gcc=4:12.2.0-3"], [PackageSpec("gcc", "4:12.2.0-3")]),
    ],
)
def test_package_specs(items: list[str], specs: list[PackageSpec]) -> None:
    assert parse_package_specs(items) == specs


@pytest.mark.parametrize(
    ("items", "field", "text"),
    [
        (["kubelet=1.34.2", "kube let"], "packages[1]", "not a package name"),
        (["kubelet="], "packages[0]", "prefix"),
        (["kubelet=1.34.*"], "packages[0]", "prefix"),
        (["kubelet", "kubelet=1.34"], "packages[1]", "twice"),
        (["-y"], "packages[0]", "not a package name"),
    ],
)
def test_bad_package_specs_name_the_entry(items: list[str], field: str, text: str) -> None:
    with pytest.raises(InputError, match=text) as caught:
        parse_package_specs(items)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("items", "family", "field", "text"),
    [
        ([{"name": "k8s/x", "url": "https://a/"}], APT, "repositories[0].name", "file name"),
        ([{"name": "k", "url": "ftp://a/"}], APT, "repositories[0].url", "https://"),
        ([{"name": "k", "url": "https://a/ bookworm"}], DNF, "repositories[0].url", "one base URL"),
        ([{"name": "k", "url": "https://a/", "key_url": "a.asc"}], APT, "repositories[0].key_url", "URL"),
        (
            [{"name": "k", "url": "https://a/"}, {"name": "k", "url": "https://b/"}],
            APT,
            "repositories[1].name",
            "twice",
        ),
    ],
)
def test_bad_repositories_name_the_field(items: list[dict[str, Any]], family: str, field: str, text: str) -> None:
    with pytest.raises(InputError, match=text) as caught:
        parse_repositories(items, family)
    assert caught.value.field == field


K8S_DEB = "https://pkgs.k8s.io/core:/stable:/v1.34/deb/"
K8S_RPM = "https://pkgs.k8s.io/core:/stable:/v1.34/rpm/"


@pytest.mark.parametrize(
    ("family", "repo", "key", "content"),
    [
        (
            APT,
            Repository("kubernetes", K8S_DEB),
            "/etc/apt/keyrings/kubernetes.asc",
            f"deb [signed-by=/etc/apt/keyrings/kubernetes.asc] {K8S_DEB} /\n",
        ),
        (
            APT,
            Repository("docker", "https://download.docker.com/linux/debian bookworm stable"),
            None,
            "deb https://download.docker.com/linux/debian bookworm stable\n",
        ),
        (
            DNF,
            Repository("kubernetes", K8S_RPM),
            "/etc/pki/rpm-gpg/kubernetes.asc",
            f"[kubernetes]\nname=kubernetes\nbaseurl={K8S_RPM}\nenabled=1\ngpgcheck=1\n"
            "gpgkey=file:///etc/pki/rpm-gpg/kubernetes.asc\n",
        ),
        (DNF, Repository("epel", "https://dl.fedoraproject.org/pub/epel/9/Everything/x86_64/"), None, "gpgcheck=1\n"),
    ],
)
def test_repository_files(family: str, repo: Repository, key: str | None, content: str) -> None:
    rendered = render_repository(family, repo, key)
    assert rendered.startswith("# Managed by metalplane.inference.node_packages")
    assert rendered.endswith(content)


@pytest.mark.parametrize(
    ("key", "extension"),
    [
        (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGM\n-----END PGP PUBLIC KEY BLOCK-----\n", "asc"),
        (b"\n-----BEGIN PGP PUBLIC KEY BLOCK-----\n", "asc"),
        (bytes([0x99, 0x02, 0x0D]) + b"\x04", "gpg"),
        (bytes([0xC6, 0x33]), "gpg"),
    ],
)
def test_key_formats(key: bytes, extension: str) -> None:
    assert key_extension(key) == extension


@pytest.mark.parametrize("key", [b"", b"<html>404 Not Found</html>", b"-----BEGIN CERTIFICATE-----"])
def test_what_is_not_a_key(key: bytes) -> None:
    with pytest.raises(ValueError, match="OpenPGP"):
        key_extension(key)


def test_dpkg_query_installed_rows_only() -> None:
    out = (
        "kubelet\tii \t1.34.2-1.1\n"
        "kubeadm\trc \t1.34.1-1.1\n"  # removed, its configuration files left
        "libc6:amd64\tii \t2.36-9+deb12u9\n"
        "containerd\tiU \t1.6.20~ds1-1+b1\n"  # unpacked, not configured
        "cri-tools\tiW \t1.34.0-1.1\n"
        "garbage line\n"
    )
    assert parse_dpkg_query(out) == {"kubelet": "1.34.2-1.1", "libc6": "2.36-9+deb12u9", "cri-tools": "1.34.0-1.1"}


def test_rpm_query_skips_the_uninstalled_and_keeps_the_newest() -> None:
    out = (
        "kubelet\t0:1.34.2-150500.1.1\n"
        "package kubeadm is not installed\n"
        "kernel-devel\t0:5.14.0-427.el9\n"
        "kernel-devel\t0:5.14.0-503.el9\n"
        "gcc\t2:11.5.0-2.el9\n"
    )
    assert parse_rpm_query(out) == {
        "kubelet": "1.34.2-150500.1.1",
        "kernel-devel": "5.14.0-503.el9",
        "gcc": "2:11.5.0-2.el9",
    }


def test_madison_rows() -> None:
    out = (
        "   kubelet | 1.34.2-1.1 | https://pkgs.k8s.io/core:/stable:/v1.34/deb  Packages\n"
        "   kubelet | 1.34.1-1.1 | https://pkgs.k8s.io/core:/stable:/v1.34/deb  Packages\n"
        "      make |    4.3-4.1 | http://deb.debian.org/debian bookworm/main amd64 Packages\n"
        "      make |    4.3-4.1 | http://deb.debian.org/debian bookworm/main Sources\n"
    )
    assert parse_madison(out) == {"kubelet": ["1.34.2-1.1", "1.34.1-1.1"], "make": ["4.3-4.1"]}


def test_dnf_list_rows_wrapped_and_installed() -> None:
    out = (
        "Last metadata expiration check: 0:02:11 ago on Mon 03 Nov 2025 10:00:00 AM UTC.\n"
        "Installed Packages\n"
        "kubelet.x86_64                1.34.1-150500.1.1                @kubernetes\n"
        "Available Packages\n"
        "kubelet.x86_64                1.34.1-150500.1.1                kubernetes\n"
        "kubelet.x86_64                1.34.2-150500.1.1                kubernetes\n"
        "kubernetes-cni-plugins-extra.x86_64\n"
        "                              1.7.1-150500.1.1                 kubernetes\n"
        "gcc.x86_64                    11.5.0-5.el9_5                   appstream\n"
    )
    assert parse_dnf_list(out) == {
        "kubelet": ["1.34.1-150500.1.1", "1.34.2-150500.1.1"],
        "kubernetes-cni-plugins-extra": ["1.7.1-150500.1.1"],
        "gcc": ["11.5.0-5.el9_5"],
    }


K8S_OFFERED = {"kubelet": ["1.34.2-1.1", "1.34.1-1.1", "1.34.0-1.1"], "kubeadm": ["1.34.2-1.1", "1.34.1-1.1"]}


@pytest.mark.parametrize(
    ("specs", "state", "installed", "changes", "missing"),
    [
        # fresh install, newest matching patch build
        (["kubelet=1.34"], "present", {}, [("kubelet", None, "1.34.2-1.1", "install")], {}),
        (["kubelet=1.34.1"], "present", {}, [("kubelet", None, "1.34.1-1.1", "install")], {}),
        (["kubelet"], "present", {}, [("kubelet", None, "1.34.2-1.1", "install")], {}),
        # already there: nothing to do, whatever the build
        (["kubelet=1.34.1"], "present", {"kubelet": "1.34.1-1.1"}, [], {}),
        (["kubelet"], "present", {"kubelet": "1.33.0-1.1"}, [], {}),
        # another version installed: upgrade or downgrade
        (["kubelet=1.34.2"], "present", {"kubelet": "1.34.1-1.1"},
         [("kubelet", "1.34.1-1.1", "1.34.2-1.1", "upgrade")], {}),
        (["kubelet=1.34.0"], "present", {"kubelet": "1.34.1-1.1"},
         [("kubelet", "1.34.1-1.1", "1.34.0-1.1", "downgrade")], {}),
        # not offered: missing, with what was found
        (["kubelet=1.34.9", "kubeadm=1.34.2"], "present", {}, [("kubeadm", None, "1.34.2-1.1", "install")],
         {"kubelet=1.34.9": ["1.34.0-1.1", "1.34.1-1.1", "1.34.2-1.1"]}),
        (["kubectl=1.34.2"], "present", {}, [], {"kubectl=1.34.2": []}),
        # absent
        (["kubelet"], "absent", {"kubelet": "1.34.1-1.1"}, [("kubelet", "1.34.1-1.1", None, "remove")], {}),
        (["kubelet=1.33"], "absent", {"kubelet": "1.34.1-1.1"}, [], {}),
        (["kubelet"], "absent", {}, [], {}),
    ],
)  # fmt: skip
def test_plan(
    specs: list[str],
    state: str,
    installed: dict[str, str],
    changes: list[tuple[str, str | None, str | None, str]],
    missing: dict[str, list[str]],
) -> None:
    plan = plan_transaction(APT, parse_package_specs(specs), state, installed, K8S_OFFERED)
    assert [(c.name, c.before, c.after, c.kind) for c in plan.changes] == changes
    assert plan.missing == missing
    assert plan.changed is bool(changes)


def test_plan_on_dnf_compares_rpm_versions_and_drops_a_zero_epoch() -> None:
    offered = {"kubelet": ["1.34.10-150500.1.1", "1.34.9-150500.1.1", "0:1.33.4-150500.1.1"]}
    plan = plan_transaction(DNF, parse_package_specs(["kubelet=1.34", "kubeadm"]), "present", {}, offered)
    assert [(c.name, c.after) for c in plan.changes] == [("kubelet", "1.34.10-150500.1.1")]
    assert plan.missing == {"kubeadm": []}


@pytest.mark.parametrize(
    ("family", "specs", "installed", "commands"),
    [
        (APT, ["kubelet=1.34.2"], {}, [["apt-get", "install", "kubelet=1.34.2-1.1"]]),
        (APT, ["kubelet=1.34.0"], {"kubelet": "1.34.2-1.1"}, [["apt-get", "install", "kubelet=1.34.0-1.1"]]),
        (APT, ["kubelet"], {"kubelet": "1.34.2-1.1"}, []),
        (DNF, ["kubelet=1.34.2"], {}, [["dnf", "install", "kubelet-1.34.2-1.1"]]),
        (DNF, ["kubelet=1.34.0"], {"kubelet": "1.34.2-1.1"}, [["dnf", "downgrade", "kubelet-1.34.0-1.1"]]),
    ],
)
def test_transaction_commands(
    family: str, specs: list[str], installed: dict[str, str], commands: list[list[str]]
) -> None:
    plan = plan_transaction(family, parse_package_specs(specs), "present", installed, K8S_OFFERED)
    built = transaction_commands(family, plan)
    assert [[c[0], c[1], c[-1]] for c in built] == commands
    if family == APT and built:
        assert {"-y", "--allow-downgrades", "--no-install-recommends"} <= set(built[0])


def test_removal_commands() -> None:
    plan = plan_transaction(APT, parse_package_specs(["containerd"]), "absent", {"containerd": "1.6"}, {})
    assert transaction_commands(APT, plan) == [["apt-get", "remove", "-y", "-q", "containerd"]]
    plan = plan_transaction(DNF, parse_package_specs(["containerd.io"]), "absent", {"containerd.io": "1.7"}, {})
    assert transaction_commands(DNF, plan) == [["dnf", "remove", "-y", "containerd.io"]]


def test_missing_message_names_the_package_and_the_versions_found() -> None:
    text = missing_message({"kubelet=1.34.9": ["1.34.1-1.1", "1.34.2-1.1"], "kubectl=1.35": []}, ["kubernetes"])
    assert "kubelet=1.34.9: no repository offers it; versions found: 1.34.1-1.1, 1.34.2-1.1" in text
    assert "kubectl=1.35: no repository offers it; versions found: none" in text
    assert "kubernetes" in text
