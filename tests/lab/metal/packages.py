"""Package managers and systemd on a simulated host: apt-get, apt-cache, dpkg-query, dnf, rpm and systemctl shims.

Why: the node roles install the driver's build tools and Kubernetes from package repositories and start services
with ``ansible.builtin.systemd_service``. A simulated host runs the controller's userland, where nothing may be
installed for real and systemd is not PID 1, so these commands are shims that keep a package database and unit
states on the host's disk and answer in the real tools' output formats (the ones ``node_packages`` and Ansible's
``systemd_service`` parse). What a repository offers is ``CATALOGUE``; a repository counts only once the host is
configured for it (a sources.list.d / yum.repos.d file naming its URL, with its signing key on disk where the
real tool would check one), and apt sees it only after ``apt-get update``, as a real apt does.

What is simulated and what is not: ``docs/lab/metal.md`` ("Packages and services").

Other shims ask ``installed(host, name)`` (a package's installed version) and ``service_active(host, unit)``.
"""

from __future__ import annotations

import configparser
import fnmatch
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lab.metal.shims import Effect, ShimHost, register

# The state on the host's disk (a reinstall wipes it, as it wipes a real host's dpkg/rpm database).
DB = "/var/lib/metal-lab/packages.json"  # {"packages": {name: {version, status, arch}}}
APT_LISTS = "/var/lib/metal-lab/apt-lists.json"  # what the last ``apt-get update`` read (apt's /var/lib/apt/lists)
UNITS = "/var/lib/metal-lab/units.json"  # {"enabled": [...], "masked": [...], "boot": id, "active": [...]}

KERNEL = os.uname().release  # the simulated host runs the controller's kernel (docs/lab/metal.md)
DEB_ARCH = "amd64"
RPM_ARCH = "x86_64"
DEBIAN_ARCHIVE = ("http://deb.debian.org/debian", "bookworm", "main")  # the installed Debian 12's own archive

# Kubernetes patch releases the lab's pkgs.k8s.io offers per minor (newest first), with the package revisions
# the upstream repositories use (https://pkgs.k8s.io/core:/stable:/v1.34/deb/ and /rpm/).
KUBERNETES_PATCHES = {"1.33": 6, "1.34": 2}
DEB_K8S_REVISION = "1.1"
RPM_K8S_RELEASE = "150500.1.1"
KUBERNETES_REPO = re.compile(r"/core:/stable:/v(?P<minor>\d+\.\d+)/(?P<kind>deb|rpm)/?\Z")
DOCKER_REPO = re.compile(r"://download\.docker\.com/linux/(?P<distro>[a-z]+)/?")


def _kubernetes(minor: str, revision: str) -> dict[str, tuple[str, ...]]:
    releases = tuple(f"{minor}.{patch}-{revision}" for patch in range(KUBERNETES_PATCHES[minor], -1, -1))
    return {
        "kubelet": releases,
        "kubeadm": releases,
        "kubectl": releases,
        "cri-tools": (f"{minor}.0-{revision}",),
        "kubernetes-cni": (f"1.7.1-{revision}",),
    }


# What each repository offers: package -> versions, newest first. "debian" and "baseos" are the installed OS's
# own repositories (always configured); the others only once the host has a repository file for them.
CATALOGUE: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {
    "deb": {
        "debian": {
            f"linux-headers-{KERNEL}": (f"{KERNEL.split('-')[0]}-1",),
            "dkms": ("3.0.10-8+deb12u1",),
            "gcc": ("4:12.2.0-3",),
            "make": ("4.3-4.1",),
            "containerd": ("1.6.20~ds1-1+b1",),
        },
        "docker": {"containerd.io": ("1.7.28-1~debian.12~bookworm", "1.7.27-1")},
        **{f"kubernetes-v{minor}": _kubernetes(minor, DEB_K8S_REVISION) for minor in KUBERNETES_PATCHES},
    },
    "rpm": {
        "baseos": {
            "kernel-devel": (KERNEL.removesuffix(f".{RPM_ARCH}"),),
            "gcc": ("11.5.0-5.el9_5",),
            "make": ("1:4.3-8.el9",),
        },
        "epel": {"dkms": ("3.2.1-1.el9",)},  # EL ships dkms in EPEL only
        "docker": {"containerd.io": ("1.7.28-1.el9",)},
        **{f"kubernetes-v{minor}": _kubernetes(minor, RPM_K8S_RELEASE) for minor in KUBERNETES_PATCHES},
    },
}
BASE_REPO = {"deb": "debian", "rpm": "baseos"}
SIGNED_REPOS = ("docker", "kubernetes-")  # third-party repositories: apt needs their key (signed-by / trusted.gpg.d)

# The units packages bring: unit -> Description. apt runs the maintainer scripts, which enable and start them
# (deb-systemd-helper/invoke-rc.d); rpm's presets leave them disabled (the upstream install guide's
# `systemctl enable --now kubelet`).
PACKAGE_UNITS = {
    "containerd": {"containerd.service": "containerd container runtime"},
    "containerd.io": {"containerd.service": "containerd container runtime"},
    "kubelet": {"kubelet.service": "kubelet: The Kubernetes Node Agent"},
}
UNIT_DIRS = {"deb": "/lib/systemd/system", "rpm": "/usr/lib/systemd/system"}
LOCAL_UNIT_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system")  # unit files a role writes
# A unit that crash-loops until a file exists: kubelet without the configuration ``kubeadm init`` writes
# (https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/install-kubeadm/: "The kubelet is now
# restarting every few seconds, as it waits in a crashloop for kubeadm to tell it what to do").
CRASHLOOP_UNLESS = {"kubelet.service": "/var/lib/kubelet/config.yaml"}

_LOCK = threading.Lock()  # shim calls arrive on the control socket's threads


# --------------------------------------------------------------------------------------------- host state
def _load(host: ShimHost, path: str, default: dict[str, Any]) -> dict[str, Any]:
    content = host.disk.read(path)
    if content is None:
        return default
    try:
        data = json.loads(content)
    except ValueError:
        return default
    return data if isinstance(data, dict) else default


def _save(host: ShimHost, path: str, data: Mapping[str, Any]) -> None:
    host.disk.write(path, json.dumps(data, indent=2, sort_keys=True).encode())


def _packages(host: ShimHost) -> dict[str, dict[str, str]]:
    return dict(_load(host, DB, {}).get("packages", {}))


def installed(host: ShimHost, name: str) -> str | None:
    """The installed version of ``name`` on ``host`` (None when it is not installed)."""
    entry = _packages(host).get(name)
    return entry["version"] if entry and entry.get("status") == "installed" else None


def seed(host: ShimHost, packages: Mapping[str, str], *, family: str = "deb") -> None:
    """Mark packages installed without a package manager, as a prebuilt node image ships them."""
    with _LOCK:
        db = _packages(host)
        for name, version in packages.items():
            db[name] = {"version": version, "status": "installed", "arch": DEB_ARCH if family == "deb" else RPM_ARCH}
        _save(host, DB, {"packages": db})


def _host_files(host: ShimHost, directory: str, pattern: str) -> list[tuple[str, str]]:
    """(path, text) of the files in ``directory`` the host's own writes put there (its disk's layer)."""
    root = host.disk.host_path(directory)
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.iterdir()):
        if path.is_file() and fnmatch.fnmatch(path.name, pattern):
            found.append((f"{directory}/{path.name}", path.read_text(errors="replace")))
    return found


def _exists(host: ShimHost, inside: str) -> bool:
    return host.disk.host_path(inside).exists()


# ---------------------------------------------------------------------------------------- repositories
@dataclass(frozen=True)
class Source:
    repo: str | None  # the CATALOGUE repository it is, None for one the lab does not know
    uri: str
    suite: str
    components: tuple[str, ...] = ()
    signed_by: str | None = None
    gpgkey: str | None = None

    @property
    def madison(self) -> str:
        """How apt-cache madison names the source: a flat repository has no dist/component part."""
        if self.suite == "/":
            return f"{self.uri.rstrip('/')}  Packages"
        return f"{self.uri} {self.suite}/{(self.components or ('main',))[0]} {DEB_ARCH} Packages"

    def as_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "uri": self.uri, "suite": self.suite, "components": list(self.components)}


def _classify(url: str, kind: str) -> str | None:
    match = KUBERNETES_REPO.search(url)
    if match:
        repo = f"kubernetes-v{match['minor']}"
        return repo if match["kind"] == kind and repo in CATALOGUE[kind] else None
    if DOCKER_REPO.search(url):
        return "docker"
    if kind == "rpm" and "epel" in url:
        return "epel"
    return None


_DEB_LINE = re.compile(r"^deb\s+(?:\[(?P<options>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)(?P<components>.*)$")


def apt_sources(host: ShimHost) -> list[Source]:
    """The Debian archive plus each ``deb`` line of the host's sources.list(.d) files (one-line style)."""
    sources = [Source(BASE_REPO["deb"], DEBIAN_ARCHIVE[0], DEBIAN_ARCHIVE[1], (DEBIAN_ARCHIVE[2],))]
    files = _host_files(host, "/etc/apt", "sources.list") + _host_files(host, "/etc/apt/sources.list.d", "*.list")
    for _path, text in files:
        for raw in text.splitlines():
            match = _DEB_LINE.match(raw.strip())
            if not match:
                continue
            options = dict(o.split("=", 1) for o in (match["options"] or "").split() if "=" in o)
            sources.append(
                Source(
                    _classify(match["uri"], "deb"),
                    match["uri"],
                    match["suite"],
                    tuple(match["components"].split()),
                    signed_by=options.get("signed-by"),
                )
            )
    return sources


def dnf_sources(host: ShimHost) -> list[Source]:
    """BaseOS/AppStream plus each enabled section of the host's yum.repos.d files."""
    sources = [Source(BASE_REPO["rpm"], "https://mirror.lab/el/9/BaseOS/x86_64/os/", "/")]
    for _path, text in _host_files(host, "/etc/yum.repos.d", "*.repo"):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(text)
        except configparser.Error:
            continue
        for section in parser.sections():
            entry = parser[section]
            if entry.get("enabled", "1").strip() == "0":
                continue
            url = entry.get("baseurl") or entry.get("metalink") or entry.get("mirrorlist") or ""
            repo = _classify(url, "rpm") or ("epel" if section.startswith("epel") else None)
            sources.append(Source(repo, url.strip(), section, gpgkey=entry.get("gpgkey")))
    return sources


def _offers(kind: str, sources: Iterable[Source]) -> dict[str, list[tuple[str, Source]]]:
    """package -> [(version, source)], newest first within each source."""
    offers: dict[str, list[tuple[str, Source]]] = {}
    for source in sources:
        for name, versions in CATALOGUE[kind].get(source.repo or "", {}).items():
            offers.setdefault(name, []).extend((v, source) for v in versions)
    return offers


def _apt_cache(host: ShimHost) -> list[Source]:
    """The sources the last ``apt-get update`` read (a fresh install's lists hold the Debian archive)."""
    data = _load(host, APT_LISTS, {})
    if "sources" not in data:
        return apt_sources(host)[:1]
    return [Source(s.get("repo"), s["uri"], s["suite"], tuple(s.get("components", ()))) for s in data["sources"]]


# --------------------------------------------------------------------------------------------- output
def _version_parts(version: str) -> dict[str, str]:
    epoch, _sep, rest = version.rpartition(":") if ":" in version.split("-", 1)[0] else ("", "", version)
    upstream, _sep, release = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return {"EPOCH": epoch or "(none)", "EPOCHNUM": epoch or "0", "VERSION": upstream, "RELEASE": release}


def _unescape(fmt: str) -> str:
    return fmt.replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")


# ----------------------------------------------------------------------------------------------- apt-get
APT_FLAGS = {
    "-y", "--yes", "--assume-yes", "-q", "-qq", "--quiet", "--no-install-recommends", "--install-recommends",
    "--allow-downgrades", "--allow-change-held-packages", "--allow-remove-essential", "-f", "--fix-broken",
    "--reinstall", "--purge", "--no-upgrade", "--only-upgrade", "-s", "--simulate", "--dry-run",
}  # fmt: skip
APT_WITH_VALUE = {"-o", "--option", "-t", "--target-release", "-c", "--config-file"}


def _apt_options(args: list[str]) -> tuple[set[str], dict[str, str], list[str], str | None]:
    """(flags, -o settings, words, error) of an apt-get/apt-cache command line (apt-get(8))."""
    flags: set[str] = set()
    settings: dict[str, str] = {}
    words: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg in APT_WITH_VALUE:
            value = next(rest, "")
            if arg in ("-o", "--option"):
                key, _sep, setting = value.partition("=")
                settings[key] = setting
        elif arg.startswith("-o") and "=" in arg:
            key, _sep, setting = arg[2:].partition("=")
            settings[key] = setting
        elif arg.startswith("--quiet=") or arg in APT_FLAGS:
            flags.add(arg)
        elif arg.startswith("-"):
            return flags, settings, words, f"E: Command line option '{arg}' is not understood\n"
        else:
            words.append(arg)
    return flags, settings, words, None


def apt_get(argv: list[str], host: ShimHost) -> Effect:
    flags, settings, words, error = _apt_options(argv[1:])
    if error:
        return Effect(rc=100, stderr=error)
    if not words:
        return Effect(rc=1, stdout="apt 2.6.1 (amd64)\nUsage: apt-get [options] command\n")
    command, names = words[0], words[1:]
    assume_yes = bool({"-y", "--yes", "--assume-yes"} & flags) or settings.get("APT::Get::Assume-Yes") == "true"
    with _LOCK:
        if command == "update":
            return _apt_update(host)
        if command in ("install", "reinstall"):
            return _apt_install(host, names, assume_yes=assume_yes, downgrades="--allow-downgrades" in flags)
        if command in ("remove", "purge"):
            return _apt_remove(host, names, assume_yes=assume_yes, purge=command == "purge" or "--purge" in flags)
    return Effect(rc=100, stderr=f"E: Invalid operation {command}\n")


def _apt_update(host: ShimHost) -> Effect:
    out: list[str] = []
    errors: list[str] = []
    for index, source in enumerate(apt_sources(host), start=1):
        where = f"{source.uri} {source.suite}".rstrip()
        if source.repo is None:
            out.append(
                f"Ign:{index} {where} InRelease\nErr:{index} {where} Release\n  404  Not Found [IP: 127.0.0.1 80]"
            )
            errors.append(f"E: The repository '{where} Release' does not have a Release file.")
            continue
        trusted = source.signed_by is None and bool(_host_files(host, "/etc/apt/trusted.gpg.d", "*"))
        if source.repo.startswith(SIGNED_REPOS) and not (
            (source.signed_by and _exists(host, source.signed_by)) or trusted
        ):
            out.append(f"Get:{index} {where} InRelease [1192 B]")
            errors.append(
                f"W: GPG error: {where} InRelease: The following signatures couldn't be verified because the public "
                "key is not available: NO_PUBKEY 234654DA9A296436\n"
                f"E: The repository '{where} InRelease' is not signed."
            )
            continue
        out.append(f"Hit:{index} {where} InRelease")
    out.append("Reading package lists...")
    if errors:
        return Effect(rc=100, stdout="\n".join(out) + "\n", stderr="\n".join(errors) + "\n")
    _save(host, APT_LISTS, {"sources": [s.as_dict() for s in apt_sources(host)]})
    return Effect(stdout="\n".join(out) + "\n")


APT_HEADER = "Reading package lists...\nBuilding dependency tree...\nReading state information...\n"


def _apt_install(host: ShimHost, names: list[str], *, assume_yes: bool, downgrades: bool) -> Effect:
    offers = _offers("deb", _apt_cache(host))
    db = _packages(host)
    wanted: list[tuple[str, str]] = []
    errors: list[str] = []
    notes: list[str] = []
    for arg in names:
        name, _sep, version = arg.partition("=")
        name = name.split("/", 1)[0]
        available = [v for v, _s in offers.get(name, [])]
        if not available:
            errors.append(f"E: Unable to locate package {name}")
            continue
        if version and version not in available:
            errors.append(f"E: Version '{version}' for '{name}' was not found")
            continue
        target = version or available[0]
        current = db.get(name, {})
        if current.get("status") == "installed" and current.get("version") == target:
            notes.append(f"{name} is already the newest version ({target}).")
            continue
        wanted.append((name, target))
    if errors:
        return Effect(rc=100, stdout=APT_HEADER, stderr="\n".join(errors) + "\n")
    new = [n for n, _v in wanted if db.get(n, {}).get("status") != "installed"]
    older = [n for n, v in wanted if n not in new and _newer(offers.get(n, []), db[n]["version"], v)]
    out = APT_HEADER + "".join(f"{note}\n" for note in notes)
    if new:
        out += "The following NEW packages will be installed:\n  " + " ".join(new) + "\n"
    if older:
        out += "The following packages will be DOWNGRADED:\n  " + " ".join(older) + "\n"
        if not downgrades:
            return Effect(
                rc=100, stdout=out, stderr="E: Packages were downgraded and -y was used without --allow-downgrades.\n"
            )
    upgraded = len(wanted) - len(new) - len(older)
    out += (
        f"{upgraded} upgraded, {len(new)} newly installed, {len(older)} downgraded, 0 to remove and 0 not upgraded.\n"
    )
    if not wanted:
        return Effect(stdout=out)
    if not assume_yes:
        return Effect(rc=1, stdout=out + "Do you want to continue? [Y/n] Abort.\n")
    for name, version in wanted:
        db[name] = {"version": version, "status": "installed", "arch": DEB_ARCH}
        out += f"Setting up {name} ({version}) ...\n"
    _save(host, DB, {"packages": db})
    _package_units_installed(host, [n for n, _v in wanted], "deb", start=True)
    return Effect(stdout=out)


def _newer(offers: list[tuple[str, Source]], current: str, target: str) -> bool:
    """Whether ``current`` sorts after ``target`` in the catalogue's newest-first order (a downgrade)."""
    order = [v for v, _s in offers]
    return current in order and target in order and order.index(current) < order.index(target)


def _apt_remove(host: ShimHost, names: list[str], *, assume_yes: bool, purge: bool) -> Effect:
    offers = _offers("deb", _apt_cache(host))
    db = _packages(host)
    out = APT_HEADER
    removing = []
    for name in names:
        if name not in db and name not in offers:
            return Effect(rc=100, stdout=out, stderr=f"E: Unable to locate package {name}\n")
        if db.get(name, {}).get("status") != "installed":
            out += f"Package '{name}' is not installed, so not removed\n"
            continue
        removing.append(name)
    if removing:
        out += "The following packages will be REMOVED:\n  " + " ".join(removing) + "\n"
    out += f"0 upgraded, 0 newly installed, {len(removing)} to remove and 0 not upgraded.\n"
    if removing and not assume_yes:
        return Effect(rc=1, stdout=out + "Do you want to continue? [Y/n] Abort.\n")
    for name in removing:
        out += f"Removing {name} ({db[name]['version']}) ...\n"
        if purge:
            del db[name]
        else:
            db[name] = {**db[name], "status": "config-files"}
    _save(host, DB, {"packages": db})
    _package_units_removed(host, removing)
    return Effect(stdout=out)


def apt_cache(argv: list[str], host: ShimHost) -> Effect:
    _flags, _settings, words, error = _apt_options(argv[1:])
    if error:
        return Effect(rc=100, stderr=error)
    if not words or words[0] != "madison":
        return Effect(rc=100, stderr=f"E: apt-cache {' '.join(words[:1])} is not simulated in the lab (madison is)\n")
    offers = _offers("deb", _apt_cache(host))
    lines = [
        f"{name:>10} | {version:>10} | {source.madison}"
        for pattern in words[1:]
        for name in sorted(n for n in offers if fnmatch.fnmatchcase(n, pattern))
        for version, source in offers[name]
    ]
    return Effect(stdout="".join(f"{line}\n" for line in lines))


# ---------------------------------------------------------------------------------------------- dpkg-query
DPKG_STATUS = {
    "installed": ("install ok installed", "ii "),
    "config-files": ("deinstall ok config-files", "rc "),
}
DPKG_DEFAULT_FORMAT = "${binary:Package}\t${Version}\n"
_DPKG_FIELD = re.compile(r"\$\{([^};]+)(?:;(-?\d+))?\}")


def dpkg_query(argv: list[str], host: ShimHost) -> Effect:
    args = argv[1:]
    fmt = DPKG_DEFAULT_FORMAT
    mode = None
    patterns: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg in ("-W", "--show"):
            mode = "show"
        elif arg in ("-s", "--status"):
            mode = "status"
        elif arg in ("-f", "--showformat"):
            fmt = _unescape(next(rest, ""))
        elif arg.startswith("--showformat="):
            fmt = _unescape(arg.split("=", 1)[1])
        elif arg.startswith("-f") and len(arg) > 2:
            fmt = _unescape(arg[2:])
        elif arg.startswith("-"):
            return Effect(rc=2, stderr=f"dpkg-query: error: unknown option {arg}\n")
        else:
            patterns.append(arg)
    if mode is None:
        return Effect(rc=2, stderr="dpkg-query: error: need an action option (the lab simulates -W and -s)\n")
    db = _packages(host)
    out: list[str] = []
    err: list[str] = []
    for pattern in patterns or ["*"]:
        names = sorted(n for n in db if fnmatch.fnmatchcase(n, pattern))
        if not names:
            err.append(
                f"dpkg-query: no packages found matching {pattern}"
                if mode == "show"
                else f"dpkg-query: package '{pattern}' is not installed and no information is available"
            )
            continue
        for name in names:
            entry = db[name]
            status, abbrev = DPKG_STATUS.get(entry.get("status", ""), DPKG_STATUS["installed"])
            fields = {
                "Package": name,
                "binary:Package": name,
                "Version": entry["version"],
                "Architecture": entry.get("arch", DEB_ARCH),
                "Status": status,
                "db:Status-Abbrev": abbrev,
                "db:Status-Want": status.split()[0],
                "db:Status-Status": status.split()[-1],
            }
            if mode == "status":
                out.append(f"Package: {name}\nStatus: {status}\nArchitecture: {fields['Architecture']}\n"
                           f"Version: {entry['version']}\n\n")  # fmt: skip
            else:
                out.append(_DPKG_FIELD.sub(lambda m, f=fields: _width(f.get(m[1], ""), m[2]), fmt))
    return Effect(rc=1 if err else 0, stdout="".join(out), stderr="".join(f"{e}\n" for e in err))


def _width(value: str, width: str | None) -> str:
    if not width:
        return value
    size = int(width)
    return value.ljust(-size) if size < 0 else value.rjust(size)


# ------------------------------------------------------------------------------------------------- rpm
RPM_DEFAULT_FORMAT = "%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}\n"
_RPM_TAG = re.compile(r"%(-?\d*)\{(\w+)\}")


def rpm(argv: list[str], host: ShimHost) -> Effect:
    args = argv[1:]
    fmt = RPM_DEFAULT_FORMAT
    query = False
    names: list[str] = []
    every = False
    rest = iter(args)
    for arg in rest:
        if arg in ("-q", "--query"):
            query = True
        elif arg in ("-qa", "-aq"):
            query = every = True
        elif arg in ("-a", "--all"):
            every = True
        elif arg in ("--qf", "--queryformat"):
            fmt = _unescape(next(rest, ""))
        elif arg.startswith(("--qf=", "--queryformat=")):
            fmt = _unescape(arg.split("=", 1)[1])
        elif arg == "--whatprovides":
            return Effect(rc=1, stdout=f"no package provides {next(rest, '')}\n")
        elif arg == "--import":
            return Effect()
        elif arg.startswith("-"):
            return Effect(rc=1, stderr=f"rpm: {arg}: not simulated in the lab (the lab simulates -q)\n")
        else:
            names.append(arg)
    if not query:
        return Effect(rc=1, stderr="rpm: no operation given (the lab simulates -q)\n")
    db = {n: e for n, e in _packages(host).items() if e.get("status") == "installed"}
    out: list[str] = []
    missing = 0
    for name in sorted(db) if every else names:
        entry = db.get(name)
        if entry is None:
            out.append(f"package {name} is not installed\n")
            missing += 1
            continue
        tags = {"NAME": name, "ARCH": entry.get("arch", RPM_ARCH), **_version_parts(entry["version"])}
        out.append(_RPM_TAG.sub(lambda m, t=tags: _width(t.get(m[2].upper(), "(none)"), m[1] or None), fmt))
    return Effect(rc=min(missing, 255), stdout="".join(out))


# ------------------------------------------------------------------------------------------------- dnf
DNF_FLAGS = {
    "-q", "--quiet", "-y", "--assumeyes", "-C", "--cacheonly", "--refresh", "--showduplicates", "--available",
    "--installed", "--nogpgcheck", "--best", "--nobest", "--allowerasing", "-v", "--verbose",
}  # fmt: skip
DNF_WITH_VALUE = ("--setopt", "--disableexcludes", "--enablerepo", "--disablerepo", "--repo", "--releasever")


def dnf(argv: list[str], host: ShimHost) -> Effect:  # noqa: PLR0911
    flags: set[str] = set()
    words: list[str] = []
    rest = iter(argv[1:])
    for arg in rest:
        if arg in DNF_FLAGS:
            flags.add(arg)
        elif arg.startswith(tuple(f"{o}=" for o in DNF_WITH_VALUE)):
            continue
        elif arg in DNF_WITH_VALUE:
            next(rest, None)
        elif arg.startswith("-"):
            return Effect(rc=2, stderr=f"dnf: error: unrecognized arguments: {arg}\n")
        else:
            words.append(arg)
    if not words:
        return Effect(rc=1, stderr="Error: No command given (the lab simulates list, install, remove, makecache)\n")
    command, specs = words[0], words[1:]
    assume_yes = bool({"-y", "--assumeyes"} & flags)
    with _LOCK:
        if command == "makecache":
            return Effect(stdout="Metadata cache created.\n")
        if command == "list":
            return _dnf_list(host, specs, flags)
        if command in ("install", "downgrade", "upgrade"):
            return _dnf_install(host, specs, assume_yes=assume_yes, gpgcheck="--nogpgcheck" not in flags)
        if command in ("remove", "erase"):
            return _dnf_remove(host, specs, assume_yes=assume_yes)
    return Effect(rc=1, stderr=f"No such command: {command}. Please use /usr/bin/dnf --help\n")


def _dnf_row(name: str, version: str, repo: str) -> str:
    return f"{f'{name}.{RPM_ARCH}':<38}{version:<34}{repo}\n"


def _dnf_list(host: ShimHost, patterns: list[str], flags: set[str]) -> Effect:
    offers = _offers("rpm", dnf_sources(host))
    db = {n: e for n, e in _packages(host).items() if e.get("status") == "installed"}
    match = patterns or ["*"]
    inst = [n for n in sorted(db) if any(fnmatch.fnmatchcase(n, p) for p in match)]
    avail = [n for n in sorted(offers) if any(fnmatch.fnmatchcase(n, p) for p in match)]
    out = "" if "-q" in flags or "--quiet" in flags else "Last metadata expiration check: 0:00:01 ago.\n"
    if inst and "--available" not in flags:
        out += "Installed Packages\n" + "".join(
            _dnf_row(n, db[n]["version"], "@" + str(db[n].get("repo", "System"))) for n in inst
        )
    rows = []
    if "--installed" not in flags:
        for name in avail:
            versions = [(v, s) for v, s in offers[name] if db.get(name, {}).get("version") != v]
            if "--showduplicates" not in flags:
                versions = versions[:1]
            rows += [_dnf_row(name, v, s.suite) for v, s in reversed(versions)]  # dnf lists oldest first
    if rows:
        out += "Available Packages\n" + "".join(rows)
    if not inst and not rows:
        return Effect(rc=1, stderr="Error: No matching Packages to list\n")
    return Effect(stdout=out)


def _dnf_resolve(spec: str, offers: Mapping[str, list[tuple[str, Source]]]) -> tuple[str, str, Source] | None:
    """A dnf package spec (``name``, ``name-version``, ``name-[epoch:]version-release[.arch]``) -> an offer."""
    if spec in offers:
        version, source = offers[spec][0]
        return spec, version, source
    for name, versions in offers.items():
        if not spec.startswith(f"{name}-"):
            continue
        wanted = spec[len(name) + 1 :].removesuffix(f".{RPM_ARCH}")
        for version, source in versions:
            bare = version.split(":", 1)[-1]
            if wanted in (version, bare) or bare.startswith(f"{wanted}-"):
                return name, version, source
    return None


def _dnf_install(host: ShimHost, specs: list[str], *, assume_yes: bool, gpgcheck: bool) -> Effect:
    offers = _offers("rpm", dnf_sources(host))
    db = _packages(host)
    wanted: list[tuple[str, str, Source]] = []
    for spec in specs:
        found = _dnf_resolve(spec, offers)
        if found is None:
            return Effect(
                rc=1, stdout=f"No match for argument: {spec}\n", stderr=f"Error: Unable to find a match: {spec}\n"
            )
        name, version, _source = found
        if db.get(name, {}).get("status") == "installed" and db[name]["version"] == version:
            continue
        wanted.append(found)
    if not wanted:
        return Effect(stdout="Dependencies resolved.\nNothing to do.\nComplete!\n")
    out = "Dependencies resolved.\nTransaction Summary\n" + f"Install  {len(wanted)} Packages\n"
    if not assume_yes:
        return Effect(rc=1, stdout=out + "Is this ok [y/N]: Operation aborted.\n")
    for _name, _version, source in wanted:
        key = (source.gpgkey or "").strip()
        if gpgcheck and key.startswith("file://") and not _exists(host, key[len("file://") :]):
            return Effect(
                rc=1, stderr=f"Curl error (37): Couldn't read a file:// file for {key}\nError: GPG check FAILED\n"
            )
    for name, version, source in wanted:
        db[name] = {"version": version, "status": "installed", "arch": RPM_ARCH, "repo": source.suite}
    _save(host, DB, {"packages": db})
    _package_units_installed(host, [n for n, _v, _s in wanted], "rpm", start=False)
    names = "".join(f"  {n}-{v.split(':', 1)[-1]}.{RPM_ARCH}\n" for n, v, _s in wanted)
    return Effect(stdout=out + "Installed:\n" + names + "\nComplete!\n")


def _dnf_remove(host: ShimHost, names: list[str], *, assume_yes: bool) -> Effect:
    db = _packages(host)
    removing = [n for n in names if db.get(n, {}).get("status") == "installed"]
    out = "".join(f"No match for argument: {n}\n" for n in names if n not in removing)
    if not removing:
        return Effect(
            stdout=out + "No packages marked for removal.\nDependencies resolved.\nNothing to do.\nComplete!\n"
        )
    if not assume_yes:
        return Effect(rc=1, stdout=out + "Is this ok [y/N]: Operation aborted.\n")
    for name in removing:
        del db[name]
    _save(host, DB, {"packages": db})
    _package_units_removed(host, removing)
    return Effect(stdout=out + "Removed:\n" + "".join(f"  {n}\n" for n in removing) + "\nComplete!\n")


# ------------------------------------------------------------------------------------------------ systemd
@dataclass(frozen=True)
class Unit:
    name: str
    description: str
    path: str
    installable: bool  # has an [Install] section (enable/disable apply), else "static"


def _unit_name(word: str) -> str:
    return word if "." in word else f"{word}.service"


def _units(host: ShimHost) -> dict[str, Unit]:
    """Every unit the host has: those its installed packages bring, and unit files written on its disk."""
    units: dict[str, Unit] = {}
    for name, entry in _packages(host).items():
        if entry.get("status") != "installed":
            continue
        kind = "rpm" if entry.get("arch") == RPM_ARCH else "deb"
        for unit, description in PACKAGE_UNITS.get(name, {}).items():
            units[unit] = Unit(unit, description, f"{UNIT_DIRS[kind]}/{unit}", True)
    for directory in reversed(LOCAL_UNIT_DIRS):  # /etc overrides /usr/lib (systemd.unit(5) search path)
        for path, text in _host_files(host, directory, "*.service") + _host_files(host, directory, "*.timer"):
            name = path.rsplit("/", 1)[1]
            match = re.search(r"^Description=(.*)$", text, re.MULTILINE)
            description = match[1].strip() if match else name
            units[name] = Unit(name, description, path, "[Install]" in text)
    return units


def _unit_state(host: ShimHost, units: Mapping[str, Unit]) -> dict[str, Any]:
    """enabled/masked (persistent) and active (this boot: at a new boot, the enabled units start)."""
    state = _load(host, UNITS, {"enabled": [], "masked": [], "boot": None, "active": []})
    boot = getattr(host, "boot_id", None)  # MetalHost's; a fake host without one never reboots
    if state.get("boot") != boot:
        state["boot"] = boot
        state["active"] = [u for u in state.get("enabled", []) if u in units and u not in state.get("masked", [])]
    return state


def _package_units_installed(host: ShimHost, names: list[str], kind: str, *, start: bool) -> None:
    units = _units(host)
    state = _unit_state(host, units)
    for name in names:
        for unit in PACKAGE_UNITS.get(name, {}):
            if kind == "deb" and unit not in state["masked"]:  # the deb's postinst: enable, then start
                state["enabled"] = sorted({*state["enabled"], unit})
                if start:
                    state["active"] = sorted({*state["active"], unit})
    _save(host, UNITS, state)


def _package_units_removed(host: ShimHost, names: list[str]) -> None:
    units = _units(host)
    state = _unit_state(host, units)
    state["active"] = [u for u in state["active"] if u in units]
    _save(host, UNITS, state)


def _active_state(host: ShimHost, unit: str, state: Mapping[str, Any]) -> tuple[str, str]:
    if unit not in state["active"]:
        return "inactive", "dead"
    needs = CRASHLOOP_UNLESS.get(unit)
    if needs and not _exists(host, needs):
        return "activating", "auto-restart"
    return "active", "running"


def _file_state(unit: Unit | None, state: Mapping[str, Any], name: str) -> str:
    if name in state["masked"]:
        return "masked"
    if unit is None:
        return ""
    if not unit.installable:
        return "static"
    return "enabled" if name in state["enabled"] else "disabled"


def service_active(host: ShimHost, unit: str) -> bool:
    """Whether ``unit`` (``kubelet`` or ``kubelet.service``) is active (running, not crash-looping) now."""
    with _LOCK:
        units = _units(host)
        name = _unit_name(unit)
        return name in units and _active_state(host, name, _unit_state(host, units))[0] == "active"


SYSTEMCTL_FLAGS = {
    "--no-pager", "--no-block", "--system", "-l", "--full", "--now", "-q", "--quiet", "--force", "-f",
    "--no-legend", "--plain", "--value", "--no-ask-password", "--all", "-a",
}  # fmt: skip


def systemctl(argv: list[str], host: ShimHost) -> Effect:
    flags: set[str] = set()
    properties: list[str] = []
    words: list[str] = []
    rest = iter(argv[1:])
    for arg in rest:
        if arg in ("--user", "--global"):
            return Effect(rc=1, stderr="Failed to connect to bus: No medium found\n")
        if arg in SYSTEMCTL_FLAGS:
            flags.add(arg)
        elif arg in ("-p", "--property"):
            properties += next(rest, "").split(",")
        elif arg.startswith("--property="):
            properties += arg.split("=", 1)[1].split(",")
        elif arg.startswith("-"):
            return Effect(rc=1, stderr=f"systemctl: unrecognized option '{arg}'\n")
        else:
            words.append(arg)
    command, names = (words[0], [_unit_name(w) for w in words[1:]]) if words else ("list-units", [])
    with _LOCK:
        units = _units(host)
        state = _unit_state(host, units)
        if command in ("daemon-reload", "daemon-reexec", "reset-failed"):
            result = Effect()
        elif command == "is-system-running":
            result = Effect(stdout="running\n")
        elif command == "show":
            result = _show(host, names, units, state, properties, values_only="--value" in flags)
        elif command == "is-active":
            lines = [_active_state(host, n, state)[0] if n in units else "inactive" for n in names]
            result = Effect(rc=0 if "active" in lines else 3, stdout="".join(f"{s}\n" for s in lines))
        elif command == "is-enabled":
            result = _is_enabled(names, units, state)
        elif command == "status":
            result = _status(host, names, units, state)
        elif command == "list-unit-files":
            result = _list_unit_files(names, units, state)
        elif command in ("enable", "disable", "mask", "unmask"):
            result = _file_command(command, names, units, state, now="--now" in flags)
        elif command in ("start", "stop", "restart", "try-restart", "reload", "reload-or-restart"):
            result = _run_command(command, names, units, state)
        else:
            return Effect(rc=1, stderr=f"Unknown command verb {command}.\n")
        _save(host, UNITS, state)
        return result


def _show(
    host: ShimHost,
    names: list[str],
    units: Mapping[str, Unit],
    state: Mapping[str, Any],
    properties: list[str],
    *,
    values_only: bool,
) -> Effect:
    blocks = []
    for name in names:
        unit = units.get(name)
        active, sub = _active_state(host, name, state) if unit else ("inactive", "dead")
        masked = name in state["masked"]
        load = "masked" if masked else ("loaded" if unit else "not-found")
        shown = {
            "Type": "simple",
            "Restart": "always" if unit else "no",
            "MainPID": "4242" if sub == "running" else "0",
            "Id": name,
            "Names": name,
            "Description": unit.description if unit else name,
            "LoadState": load,
            "ActiveState": active,
            "SubState": sub,
            "FragmentPath": "/dev/null" if masked else (unit.path if unit else ""),
            "UnitFileState": _file_state(unit, state, name),
            "UnitFilePreset": "enabled" if unit else "",
            "CanStart": "yes" if unit and not masked else "no",
            "CanStop": "yes" if unit else "no",
        }
        if not unit and not masked:
            shown["LoadError"] = f'org.freedesktop.systemd1.NoSuchUnit "Unit {name} not found."'
        keys = [p for p in properties if p] or list(shown)
        blocks.append("".join(f"{shown.get(k, '')}\n" if values_only else f"{k}={shown.get(k, '')}\n" for k in keys))
    return Effect(stdout="\n".join(blocks))


def _is_enabled(names: list[str], units: Mapping[str, Unit], state: Mapping[str, Any]) -> Effect:
    out: list[str] = []
    err: list[str] = []
    for name in names:
        file_state = _file_state(units.get(name), state, name)
        if not file_state:
            err.append(f"Failed to get unit file state for {name}: No such file or directory\n")
        else:
            out.append(f"{file_state}\n")
    ok = any(s.strip() in ("enabled", "static", "enabled-runtime", "alias", "indirect") for s in out)
    return Effect(rc=0 if ok else 1, stdout="".join(out), stderr="".join(err))


def _status(host: ShimHost, names: list[str], units: Mapping[str, Unit], state: Mapping[str, Any]) -> Effect:
    out = ""
    rc = 0
    for name in names:
        unit = units.get(name)
        if unit is None:
            return Effect(rc=4, stderr=f"Unit {name} could not be found.\n")
        active, sub = _active_state(host, name, state)
        rc = rc or (0 if active == "active" else 3)
        out += (
            f"{'●' if active == 'active' else '○'} {name} - {unit.description}\n"
            f"     Loaded: loaded ({unit.path}; {_file_state(unit, state, name)}; preset: enabled)\n"
            f"     Active: {active} ({sub})\n"
        )
    return Effect(rc=rc, stdout=out)


def _list_unit_files(patterns: list[str], units: Mapping[str, Unit], state: Mapping[str, Any]) -> Effect:
    listed = [n for n in sorted(units) if not patterns or any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    if not listed:
        return Effect(rc=1, stdout="UNIT FILE STATE PRESET\n\n0 unit files listed.\n")
    rows = "".join(f"{n:<40} {_file_state(units[n], state, n):<8} enabled\n" for n in listed)
    return Effect(stdout=f"{'UNIT FILE':<40} STATE    PRESET\n{rows}\n{len(listed)} unit files listed.\n")


def _file_command(
    command: str, names: list[str], units: Mapping[str, Unit], state: dict[str, Any], *, now: bool
) -> Effect:
    err = ""
    for name in names:
        unit = units.get(name)
        if command == "mask":
            state["masked"] = sorted({*state["masked"], name})
            state["active"] = [u for u in state["active"] if u != name] if now else state["active"]
            err += f"Created symlink /etc/systemd/system/{name} → /dev/null.\n"
            continue
        if command == "unmask":
            if name in state["masked"]:
                state["masked"].remove(name)
                err += f'Removed "/etc/systemd/system/{name}".\n'
            continue
        if unit is None:
            return Effect(rc=1, stderr=f"Failed to {command} unit: Unit file {name} does not exist.\n")
        if name in state["masked"]:
            return Effect(rc=1, stderr=f"Failed to {command} unit: Unit file /etc/systemd/system/{name} is masked.\n")
        if command == "enable":
            if unit.installable and name not in state["enabled"]:
                state["enabled"] = sorted({*state["enabled"], name})
                err += f"Created symlink /etc/systemd/system/multi-user.target.wants/{name} → {unit.path}.\n"
            if now:
                state["active"] = sorted({*state["active"], name})
        else:
            if name in state["enabled"]:
                state["enabled"].remove(name)
                err += f'Removed "/etc/systemd/system/multi-user.target.wants/{name}".\n'
            if now:
                state["active"] = [u for u in state["active"] if u != name]
    return Effect(stderr=err)


def _run_command(command: str, names: list[str], units: Mapping[str, Unit], state: dict[str, Any]) -> Effect:
    for name in names:
        verb = command.replace("-", " ")
        if name not in units:
            if command in ("stop", "try-restart"):
                continue  # stopping what does not exist is not an error for systemd either
            return Effect(rc=5, stderr=f"Failed to {verb} {name}: Unit {name} not found.\n")
        if name in state["masked"] and command != "stop":
            return Effect(rc=1, stderr=f"Failed to {verb} {name}: Unit {name} is masked.\n")
        if command == "stop":
            state["active"] = [u for u in state["active"] if u != name]
        elif command == "try-restart":
            continue
        else:
            state["active"] = sorted({*state["active"], name})
    return Effect()


# ------------------------------------------------------------------------------------------ registration
register("apt-get", "bin", apt_get)
register("apt-cache", "bin", apt_cache)
register("dpkg-query", "bin", dpkg_query)
register("dnf", "bin", dnf)
register("rpm", "bin", rpm)
register("systemctl", "bin", systemctl)
