"""Is a Kubernetes version available? The package index parsers and the preflight's lookup, table by table.

Why: "not available" is a refusal before any write only if the index is read right (Debian's ``Packages`` stanzas,
rpm's ``repomd.xml`` -> primary index, gzip or not), a minor without a repository is told apart from a version the
repository lacks, and a repository that cannot be reached does not fail the run.
"""

from __future__ import annotations

import gzip
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._metal import kube_release as kr

BASE = "https://pkgs.k8s.io"
DEB = """Package: cri-tools
Version: 1.34.0-1.1

Package: kubeadm
Version: 1.34.1-1.1
Architecture: amd64

Package: kubeadm
Version: 1.34.2-1.1
Architecture: amd64
"""
REPOMD = b"""<?xml version="1.0" encoding="UTF-8"?>
<repomd xmlns="http://linux.duke.edu/metadata/repo" xmlns:rpm="http://linux.duke.edu/metadata/rpm">
  <data type="other"><location href="repodata/abc-other.xml.gz"/></data>
  <data type="primary"><location href="repodata/def-primary.xml.gz"/></data>
</repomd>"""
PRIMARY = b"""<?xml version="1.0" encoding="UTF-8"?>
<metadata xmlns="http://linux.duke.edu/metadata/common" packages="2">
  <package type="rpm"><name>kubeadm</name><arch>x86_64</arch>
    <version epoch="0" ver="1.34.2" rel="150500.1.1"/></package>
  <package type="rpm"><name>kubelet</name><arch>x86_64</arch>
    <version epoch="0" ver="1.34.3" rel="150500.1.1"/></package>
</metadata>"""
SERVED = {
    f"{BASE}/core:/stable:/v1.34/deb/Packages": DEB.encode(),
    f"{BASE}/core:/stable:/v1.34/rpm/repodata/repomd.xml": REPOMD,
    f"{BASE}/core:/stable:/v1.34/rpm/repodata/def-primary.xml.gz": gzip.compress(PRIMARY),
}


class Server:
    """A fetch over ``SERVED`` (404 elsewhere); ``down`` raises like an unreachable server. Records each URL."""

    def __init__(self, *, down: bool = False) -> None:
        self.down = down
        self.asked: list[str] = []

    def __call__(self, url: str) -> bytes | None:
        self.asked.append(url)
        if self.down:
            raise kr.Unreachable("connection refused")
        return SERVED.get(url)


def test_the_parsers_read_upstream_versions() -> None:
    assert kr.deb_versions(DEB) == {"1.34.1", "1.34.2"}
    assert kr.primary_location(REPOMD) == "repodata/def-primary.xml.gz"
    assert kr.rpm_versions(gzip.compress(PRIMARY)) == {"1.34.2"}
    assert kr.rpm_versions(PRIMARY) == {"1.34.2"}


# (version, family, problem text or None, warning or not)
CASES: list[tuple[tuple[int, int, int], str, str | None, bool]] = [
    ((1, 34, 2), "debian", None, False),
    ((1, 34, 2), "el", None, False),
    ((1, 34, 9), "debian", "not available from https://pkgs.k8s.io/core:/stable:/v1.34/deb/ (kubeadm versions", False),
    ((1, 34, 3), "el", "(kubeadm versions there: 1.34.2); use one of them", False),
    ((1, 99, 0), "ubuntu", "there is no package repository for v1.99", False),
]


@pytest.mark.parametrize(("version", "family", "problem", "warned"), CASES)
def test_a_version_is_looked_up_in_its_minors_repository(
    version: tuple[int, int, int], family: str, problem: str | None, warned: bool
) -> None:
    wanted = [kr.Wanted("clusters[0]", version, family, BASE)]
    problems, warnings = kr.check_available(wanted, Server())
    assert [p.field for p in problems] == (["clusters[0].kubeadm_node_kubernetes_version"] if problem else [])
    if problem:
        assert problem in problems[0].msg, problems[0].msg
    assert bool(warnings) is warned


def test_an_unreachable_repository_is_a_warning_and_each_minor_is_read_once() -> None:
    server = Server(down=True)
    wanted = [kr.Wanted(f"clusters[{i}]", (1, 34, 2), "debian", BASE + "/") for i in range(3)]
    problems, warnings = kr.check_available(wanted, server)
    assert problems == []
    assert len(warnings) == 3
    assert "could not read the package repository" in warnings[0]
    assert server.asked == [f"{BASE}/core:/stable:/v1.34/deb/Packages"]


def test_a_mirror_replaces_pkgs_k8s_io() -> None:
    asked: list[str] = []

    def mirror(url: str) -> Any:
        asked.append(url)
        return DEB.replace(BASE, "").encode()

    problems, _warnings = kr.check_available([kr.Wanted("c", (1, 34, 2), "debian", "http://mirror.lan/k8s")], mirror)
    assert problems == []
    assert asked == ["http://mirror.lan/k8s/core:/stable:/v1.34/deb/Packages"]
