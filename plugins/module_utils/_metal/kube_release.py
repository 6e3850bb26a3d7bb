# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is the Kubernetes version a cluster asks for available? Asked of the package repository it will be installed from.

Why the repository and not a table: a table of released versions is stale the day a patch release ships, and what
matters is whether the node can install ``kubeadm=<version>``, which only the repository it installs from can say
(``pkgs.k8s.io`` publishes one repository per minor, ``core:/stable:/v<minor>/``, or a mirror of it given by
``kubeadm_node_package_repository``; https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/install-kubeadm/).
So the preflight reads that minor's package index once (Debian: ``deb/Packages``; EL: ``rpm/repodata/repomd.xml``
and its primary index) and refuses a minor without a repository or a version the index does not list, naming the
versions it has. Cheap (one or two GETs per distinct repository and minor) and skippable: a repository that cannot be
reached is a warning, not a refusal (an air-gapped controller may not see the nodes' mirror), and
``check_package_repositories: false`` skips it (the lab, whose nodes' package managers are shims).

Parsers are pure; ``http_fetch`` is the one I/O.
"""

from __future__ import annotations

import gzip
import re
import xml.etree.ElementTree as ET  # the index of a repository the inventory names (and TLS-verified)
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.problems import Problem

# The upstream package repositories (https://kubernetes.io/blog/2023/08/15/pkgs-k8s-io-introduction/).
DEFAULT_REPOSITORY = "https://pkgs.k8s.io"
PACKAGE = "kubeadm"  # the package whose versions say which releases the repository offers
DEB_FAMILIES = ("debian", "ubuntu")

# url -> the body, None for a 404 (no such repository); raises OSError when the server cannot be reached.
Fetch = Callable[[str], "bytes | None"]


class Unreachable(OSError):
    """The repository's server did not answer (or answered with an error other than 404)."""


def minor_base(repository: str, minor: tuple[int, int], family: str) -> str:
    kind = "deb" if family in DEB_FAMILIES else "rpm"
    return f"{repository.rstrip('/')}/core:/stable:/v{minor[0]}.{minor[1]}/{kind}/"


def deb_versions(index: str, package: str = PACKAGE) -> set[str]:
    """Upstream versions (``1.34.2`` of ``1.34.2-1.1``) of ``package`` in a Debian ``Packages`` index."""
    found: set[str] = set()
    for stanza in index.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.MULTILINE))
        if fields.get("Package") == package and fields.get("Version"):
            found.add(fields["Version"].split(":", 1)[-1].split("-", 1)[0])
    return found


def primary_location(repomd: bytes) -> str:
    """The ``primary`` index's href in an rpm ``repomd.xml``; ValueError when it names none."""
    root = ET.fromstring(repomd)
    for data in root.findall(".//{*}data"):
        if data.get("type") == "primary":
            location = data.find("{*}location")
            if location is not None and location.get("href"):
                return str(location.get("href"))
    msg = "repomd.xml names no primary index"
    raise ValueError(msg)


def rpm_versions(primary: bytes, package: str = PACKAGE) -> set[str]:
    """The ``ver`` of every ``package`` in an rpm primary index (gzip or plain XML)."""
    if primary[:2] == b"\x1f\x8b":
        primary = gzip.decompress(primary)
    root = ET.fromstring(primary)
    found: set[str] = set()
    for entry in root.findall(".//{*}package"):
        name = entry.find("{*}name")
        version = entry.find("{*}version")
        if name is not None and name.text == package and version is not None and version.get("ver"):
            found.add(str(version.get("ver")))
    return found


def offered(fetch: Fetch, base: str, family: str) -> set[str] | None:
    """The versions the minor's repository at ``base`` offers; None when it has no such repository (404)."""
    if family in DEB_FAMILIES:
        body = fetch(base + "Packages")
        return None if body is None else deb_versions(body.decode("utf-8", "replace"))
    repomd = fetch(base + "repodata/repomd.xml")
    if repomd is None:
        return None
    primary = fetch(base + primary_location(repomd))
    return None if primary is None else rpm_versions(primary)


@dataclass(frozen=True)
class Wanted:
    """One cluster's ask: where its field is, the version, the OS family, the repository base URL."""

    where: str
    version: tuple[int, int, int]
    family: str
    repository: str


def check_available(wanted: Sequence[Wanted], fetch: Fetch) -> tuple[list[Problem], list[str]]:
    """Problems for versions the repository does not offer; warnings for repositories that could not be read."""
    problems: list[Problem] = []
    warnings: list[str] = []
    seen: dict[str, set[str] | Exception | None] = {}
    for ask in wanted:
        base = minor_base(ask.repository, ask.version[:2], ask.family)  # type: ignore[arg-type]
        if base not in seen:
            try:
                seen[base] = offered(fetch, base, ask.family)
            except (OSError, ValueError, ET.ParseError) as exc:
                seen[base] = exc
        versions = seen[base]
        text = "v{}.{}.{}".format(*ask.version)
        at = f"{ask.where}.kubeadm_node_kubernetes_version"
        if isinstance(versions, Exception):
            warnings.append(f"{at}: could not read the package repository {base} ({versions}); {text} not checked")
        elif versions is None:
            problems.append(
                Problem(
                    at,
                    f"{text} is not available: there is no package repository for v{ask.version[0]}.{ask.version[1]} "
                    f"at {base} (a minor not released yet, or one the mirror kubeadm_node_package_repository lacks); "
                    "use a released version",
                )
            )
        elif "{}.{}.{}".format(*ask.version) not in versions:
            have = ", ".join(sorted(versions, key=_key)[-5:]) or "none"
            problems.append(
                Problem(at, f"{text} is not available from {base} ({PACKAGE} versions there: {have}); use one of them")
            )
    return problems, warnings


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def http_fetch(timeout: int) -> Fetch:
    """GET with ansible's ``open_url`` (TLS verified, redirects followed: pkgs.k8s.io redirects to its CDN)."""

    def fetch(url: str) -> bytes | None:
        from urllib.error import HTTPError

        from ansible.module_utils.urls import open_url

        options: dict[str, Any] = {"timeout": timeout, "follow_redirects": "all"}
        try:
            with open_url(url, **options) as response:
                return bytes(response.read())
        except HTTPError as exc:
            if exc.code == 404:
                return None
            raise Unreachable(f"HTTP {exc.code}") from exc
        except Exception as exc:  # urllib/ssl/socket errors all mean "could not reach"
            raise Unreachable(str(exc)) from exc

    return fetch
