# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Package installs on a node, decided by pure functions: what is asked, what is there, what to run.

Why a planner of our own rather than ``ansible.builtin.package``: the node roles pin Kubernetes to a patch
release the inventory names (``kubelet=1.34.2``) across two families whose tools spell versions differently
(``1.34.2-1.1`` from apt, ``1.34.2-150500.1.1`` from dnf), add the upstream repositories that carry them, and
must fail *naming the versions that exist* when the inventory asks for one that does not ("Kubernetes version
not available"). Everything here is pure (text in, decisions out) and table-tested; ``packages_run`` runs the
commands on the node.

Command output formats parsed here, from the tools' own documentation:

- ``dpkg-query -W -f '${Package}\\t${db:Status-Abbrev}\\t${Version}\\n'`` (dpkg-query(1): ``db:Status-Abbrev`` is
  the three-letter want/status/error abbreviation, status ``i`` = installed).
- ``apt-cache madison`` (apt-cache(8)): ``<name> | <version> | <uri> <dist/component arch> Packages``, one line per
  version and source, newest first.
- ``rpm -q --qf '%{NAME}\\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n'`` (rpm(8) query format; ``EPOCHNUM`` is 0 for no
  epoch); a package that is not installed prints ``package <name> is not installed``.
- ``dnf list --showduplicates`` (dnf(8)): ``<name>.<arch>  <[epoch:]version-release>  <repo>`` under the
  ``Installed Packages`` / ``Available Packages`` headings; installed rows name their repository ``@<repo>``; a
  long name pushes the rest of its row onto the next line.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError, InputError

from .versions import dpkg_compare, matches_prefix, rpm_compare, strip_zero_epoch

# The two families the collection installs on (os-release(5) ID / ID_LIKE values).
APT = "apt"
DNF = "dnf"
FAMILY_IDS = {
    APT: ("debian", "ubuntu"),
    DNF: ("rhel", "fedora", "centos", "rocky", "almalinux"),
}
OS_RELEASE_PATHS = ("/etc/os-release", "/usr/lib/os-release")  # os-release(5): the first that exists

PRESENT = "present"
ABSENT = "absent"

# Package names as the package managers accept them: Debian policy 5.6.1 (lower case, digits, + - .), rpm
# additionally upper case and '_'. A version prefix: what a version may hold (deb-version(7), rpm EVR).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9+._-]*\Z")
VERSION_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+~:^_-]*\Z")
# A repository name becomes a file name (sources.list.d/<name>.list, yum.repos.d/<name>.repo, the key's file).
REPO_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
REPO_URL_SCHEMES = ("https://", "http://", "file://")

# Where repositories and their keys go. apt: a one-line-style list file with signed-by (sources.list(5)),
# the key under /etc/apt/keyrings as apt's docs recommend for local keys; apt >= 2.4 reads an ASCII-armored key
# from a ``.asc`` file, a binary keyring from ``.gpg``. dnf: a .repo file (dnf.conf(5)) with ``gpgkey`` pointing at
# the key kept under /etc/pki/rpm-gpg, where EL keeps its own.
APT_SOURCES_DIR = "/etc/apt/sources.list.d"
APT_KEYRINGS_DIR = "/etc/apt/keyrings"
DNF_REPOS_DIR = "/etc/yum.repos.d"
DNF_KEYS_DIR = "/etc/pki/rpm-gpg"
MANAGED_HEADER = "# Managed by metalplane.inference.node_packages: edits are overwritten.\n"
ARMORED_KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----"
# RFC 4880 4.2: a binary key starts with a Public-Key packet (tag 6), old format (0x98-0x9B) or new (0xC6).
BINARY_KEY_FIRST_BYTES = frozenset({0x98, 0x99, 0x9A, 0x9B, 0xC6})

# The environment every package manager call runs with: no prompt (debconf(7) DEBIAN_FRONTEND), C locale so the
# output parsed here is not translated.
BASE_ENV = {"DEBIAN_FRONTEND": "noninteractive", "LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
# apt-get options for an unattended install: keep a changed config file, take the maintainer's new one otherwise
# (dpkg(1) --force-confdef/--force-confold), allow the downgrade a pin can mean.
APT_INSTALL = (
    "apt-get",
    "install",
    "-y",
    "-q",
    "--no-install-recommends",
    "--allow-downgrades",
    "-o",
    "Dpkg::Options::=--force-confdef",
    "-o",
    "Dpkg::Options::=--force-confold",
)
DPKG_QUERY_FORMAT = "${Package}\\t${db:Status-Abbrev}\\t${Version}\\n"
RPM_QUERY_FORMAT = "%{NAME}\\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n"
# dpkg status letters (dpkg-query(1), second letter of db:Status-Abbrev) under which the package's files are
# on disk and configured or about to be: installed, triggers-awaited, triggers-pending.
DPKG_INSTALLED = frozenset("iWt")


# ---------------------------------------------------------------------------------------------- family
def parse_os_release(text: str) -> dict[str, str]:
    """os-release(5) ``KEY=value`` lines (shell quoting) -> dict; comments and blank lines skipped."""
    result: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _sep, raw = line.partition("=")
        try:
            words = shlex.split(raw)
        except ValueError:
            words = [raw.strip("\"'")]
        result[key.strip()] = " ".join(words)
    return result


def package_family(os_release: Mapping[str, str]) -> str:
    """``apt`` or ``dnf`` from ``ID`` then ``ID_LIKE``; another OS is a conflict naming what it found."""
    ids = [os_release.get("ID", "").lower(), *os_release.get("ID_LIKE", "").lower().split()]
    for candidate in ids:
        for family, names in FAMILY_IDS.items():
            if candidate in names:
                return family
    raise ConflictError(
        f"the node runs {os_release.get('PRETTY_NAME') or os_release.get('ID') or 'an unknown OS'}: packages are "
        "installed on the Debian family (apt) and the EL family (dnf) only",
        details={"id": os_release.get("ID"), "id_like": os_release.get("ID_LIKE")},
    )


def compare_versions(family: str) -> Callable[[str, str], int]:
    return dpkg_compare if family == APT else rpm_compare


# ----------------------------------------------------------------------------------------------- input
@dataclass(frozen=True)
class PackageSpec:
    name: str
    version: str | None = None  # a prefix of the version (whole components), None for any

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}={self.version}"


def parse_package_specs(items: Sequence[Any]) -> list[PackageSpec]:
    """``packages`` entries (``name`` or ``name=<version prefix>``) -> specs; bad ones are input errors."""
    specs: list[PackageSpec] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        where = f"packages[{index}]"
        text = str(item).strip()
        name, sep, version = text.partition("=")
        name, version = name.strip(), version.strip()
        if not NAME_PATTERN.match(name):
            raise InputError(where, f"{text!r} is not a package name (letters, digits, '+', '.', '_', '-')")
        if sep and not VERSION_PATTERN.match(version):
            raise InputError(
                where, f"{text!r}: the version after '=' must be a version or its prefix, such as 1.34.2 or 1.34"
            )
        if name in seen:
            raise InputError(where, f"{name} is listed twice; list each package once")
        seen.add(name)
        specs.append(PackageSpec(name, version if sep else None))
    return specs


@dataclass(frozen=True)
class Repository:
    name: str
    url: str  # apt: "<uri>" (a flat repository, suite "/") or "<uri> <suite> [<component>...]"; dnf: baseurl
    key_url: str | None = None


def parse_repositories(items: Sequence[Mapping[str, Any]], family: str) -> list[Repository]:
    repositories: list[Repository] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        where = f"repositories[{index}]"
        name = str(item.get("name") or "")
        url = " ".join(str(item.get("url") or "").split())
        key_url = item.get("key_url")
        if not REPO_NAME_PATTERN.match(name):
            raise InputError(f"{where}.name", f"{name!r} must be a file name: letters, digits, '.', '_', '-'")
        if name in seen:
            raise InputError(f"{where}.name", f"repository {name} is listed twice")
        seen.add(name)
        if not url.startswith(REPO_URL_SCHEMES):
            raise InputError(f"{where}.url", f"{url!r} must be an https://, http:// or file:// URL")
        if family == DNF and " " in url:
            raise InputError(f"{where}.url", f"{url!r}: a dnf repository is one base URL, without suite or components")
        if key_url is not None and not str(key_url).startswith(REPO_URL_SCHEMES):
            raise InputError(f"{where}.key_url", f"{key_url!r} must be an https://, http:// or file:// URL")
        repositories.append(Repository(name, url, str(key_url) if key_url is not None else None))
    return repositories


def key_extension(key: bytes) -> str:
    """``asc`` for an ASCII-armored OpenPGP key, ``gpg`` for a binary one; anything else is not a key."""
    if key.lstrip().startswith(ARMORED_KEY):
        return "asc"
    if key and key[0] in BINARY_KEY_FIRST_BYTES:
        return "gpg"
    raise ValueError("not an OpenPGP public key (neither ASCII-armored nor a binary key packet)")


def key_path(family: str, name: str, extension: str) -> str:
    return f"{APT_KEYRINGS_DIR}/{name}.{extension}" if family == APT else f"{DNF_KEYS_DIR}/{name}.{extension}"


def repository_path(family: str, name: str) -> str:
    return f"{APT_SOURCES_DIR}/{name}.list" if family == APT else f"{DNF_REPOS_DIR}/{name}.repo"


def render_repository(family: str, repo: Repository, signing_key: str | None) -> str:
    """The repository file's content; ``signing_key`` is the key file's path on the node, if any.

    apt (sources.list(5), one-line style): ``deb [signed-by=<key>] <uri> <suite> [components]``; a URL without
    suite is a flat repository (suite ``/``), as pkgs.k8s.io is
    (https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/install-kubeadm/).
    dnf (dnf.conf(5)): one section with ``baseurl``, ``gpgcheck=1`` and the key as a ``file://`` URL; without a
    key, packages must be signed by a key already imported on the node.
    """
    if family == APT:
        uri, *rest = repo.url.split()
        options = f"[signed-by={signing_key}] " if signing_key else ""
        return f"{MANAGED_HEADER}deb {options}{uri} {' '.join(rest) if rest else '/'}\n"
    lines = [
        MANAGED_HEADER.rstrip("\n"),
        f"[{repo.name}]",
        f"name={repo.name}",
        f"baseurl={repo.url}",
        "enabled=1",
        "gpgcheck=1",
    ]
    if signing_key:
        lines.append(f"gpgkey=file://{signing_key}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- output
def parse_dpkg_query(stdout: str) -> dict[str, str]:
    """Installed packages -> version, from the DPKG_QUERY_FORMAT lines (removed, config-files rows skipped)."""
    installed: dict[str, str] = {}
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) != 3:
            continue
        name, status, version = (p.strip() for p in parts)
        name = name.split(":", 1)[0]  # a multi-arch name (libc6:amd64)
        if len(status) >= 2 and status[1] in DPKG_INSTALLED and version:
            installed[name] = version
    return installed


def parse_rpm_query(stdout: str) -> dict[str, str]:
    """Installed packages -> ``[epoch:]version-release`` (epoch 0 dropped), from the RPM_QUERY_FORMAT lines."""
    installed: dict[str, str] = {}
    for line in stdout.splitlines():
        name, sep, version = line.partition("\t")
        if not sep or not version.strip():
            continue  # "package x is not installed"
        version = strip_zero_epoch(version.strip())
        previous = installed.get(name)
        # Several installed versions (kernel-devel): the newest one stands for the package.
        if previous is None or rpm_compare(version, previous) > 0:
            installed[name.strip()] = version
    return installed


def parse_madison(stdout: str) -> dict[str, list[str]]:
    """``apt-cache madison`` -> offered versions per package (each once, in the order apt lists them)."""
    offered: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 3 or not parts[0] or not parts[1]:
            continue
        if parts[2].endswith("Sources"):
            continue  # a deb-src entry offers no binary package
        versions = offered.setdefault(parts[0], [])
        if parts[1] not in versions:
            versions.append(parts[1])
    return offered


_DNF_HEADINGS = ("Installed Packages", "Available Packages", "Last metadata expiration check", "Error:")


def parse_dnf_list(stdout: str) -> dict[str, list[str]]:
    """``dnf list --showduplicates`` -> versions offered by a repository (not the ``@installed`` rows)."""
    offered: dict[str, list[str]] = {}
    words: list[str] = []
    for line in stdout.splitlines():
        if not line.strip() or line.startswith(_DNF_HEADINGS):
            continue
        words.extend(line.split())
        if len(words) < 3:
            continue
        name_arch, version, repo = words[0], words[1], words[2]
        words = []
        if repo.startswith("@"):
            continue
        name = name_arch.rsplit(".", 1)[0] if "." in name_arch else name_arch
        versions = offered.setdefault(name, [])
        if version not in versions:
            versions.append(version)
    return offered


# ---------------------------------------------------------------------------------------------- commands
def installed_query(family: str, names: Iterable[str]) -> list[str]:
    if family == APT:
        return ["dpkg-query", "-W", "-f", DPKG_QUERY_FORMAT, *names]
    return ["rpm", "-q", "--qf", RPM_QUERY_FORMAT, *names]


def available_query(family: str, names: Iterable[str]) -> list[str]:
    if family == APT:
        return ["apt-cache", "madison", *names]
    return ["dnf", "-q", "list", "--showduplicates", *names]


def refresh_command(family: str) -> list[str]:
    return ["apt-get", "update", "-q"] if family == APT else ["dnf", "-q", "-y", "makecache"]


# ------------------------------------------------------------------------------------------------ plan
@dataclass(frozen=True)
class Change:
    name: str
    before: str | None
    after: str | None  # the version to install, None to remove
    kind: str  # install | upgrade | downgrade | remove


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    before: dict[str, str | None] = field(default_factory=dict)
    after: dict[str, str | None] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)  # spec -> the versions found for its package

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def plan_transaction(
    family: str,
    specs: Sequence[PackageSpec],
    state: str,
    installed: Mapping[str, str],
    offered: Mapping[str, Sequence[str]],
) -> Plan:
    """Desired specs + what is installed + what the repositories offer -> the changes, and what is missing.

    present: an installed version that matches the pin (or any, unpinned) is kept; otherwise the newest offered
    version that matches is installed (an upgrade or a downgrade from another installed version). absent: a
    package installed (at a version matching the pin, when pinned) is removed.
    """
    compare = compare_versions(family)
    plan = Plan()
    for spec in specs:
        current = installed.get(spec.name)
        plan.before[spec.name] = current
        if state == ABSENT:
            remove = current is not None and (spec.version is None or matches_prefix(current, spec.version))
            plan.after[spec.name] = None if remove else current
            if remove:
                plan.changes.append(Change(spec.name, current, None, "remove"))
            continue
        if current is not None and (spec.version is None or matches_prefix(current, spec.version)):
            plan.after[spec.name] = current
            continue
        versions = [strip_zero_epoch(v) for v in offered.get(spec.name, ())]
        candidates = [v for v in versions if spec.version is None or matches_prefix(v, spec.version)]
        if not candidates:
            plan.missing[str(spec)] = sorted(set(versions), key=_sort_key(compare))
            plan.after[spec.name] = current
            continue
        target = max(candidates, key=_sort_key(compare))
        kind = "install" if current is None else ("upgrade" if compare(target, current) > 0 else "downgrade")
        plan.changes.append(Change(spec.name, current, target, kind))
        plan.after[spec.name] = target
    return plan


def _sort_key(compare: Callable[[str, str], int]) -> Callable[[str], Any]:
    return functools.cmp_to_key(compare)


def missing_message(missing: Mapping[str, Sequence[str]], repositories: Sequence[str]) -> str:
    """The operator's message for requested versions no configured repository offers."""
    parts = []
    for spec, versions in missing.items():
        found = ", ".join(versions) if versions else "none (no repository carries the package)"
        parts.append(f"{spec}: no repository offers it; versions found: {found}")
    where = f" (repositories written by this task: {', '.join(repositories)})" if repositories else ""
    return (
        "; ".join(parts)
        + where
        + ". Pick a version from those found, or add the repository that carries it (for Kubernetes, the "
        "pkgs.k8s.io repository of that minor release)"
    )


def transaction_commands(family: str, plan: Plan) -> list[list[str]]:
    """The package manager calls that carry out ``plan`` (nothing when it changes nothing)."""
    installs = [c for c in plan.changes if c.kind in ("install", "upgrade")]
    downgrades = [c for c in plan.changes if c.kind == "downgrade"]
    removals = [c.name for c in plan.changes if c.kind == "remove"]
    commands: list[list[str]] = []
    if family == APT:
        wanted = [f"{c.name}={c.after}" for c in installs + downgrades]
        if wanted:
            commands.append([*APT_INSTALL, *wanted])
        if removals:
            commands.append(["apt-get", "remove", "-y", "-q", *removals])
        return commands
    if installs:
        commands.append(["dnf", "install", "-y", *(f"{c.name}-{c.after}" for c in installs)])
    if downgrades:
        commands.append(["dnf", "downgrade", "-y", *(f"{c.name}-{c.after}" for c in downgrades)])
    if removals:
        commands.append(["dnf", "remove", "-y", *removals])
    return commands
