"""The NVIDIA driver on a simulated host: a stand-in ``.run`` installer and the shims it and the role meet.

Why: the ``nvidia_driver`` role must be judged by what a real node does with it - the installer refuses
without kernel headers, a compiler and make, refuses while nouveau holds the GPUs or the old module is in use,
builds through DKMS for the kernel it is given, and only then does ``nvidia-smi`` answer for the GPUs in the
host's PCIe slots. None of that can touch the controller's kernel, so each piece is simulated from the host's
own state (its disk, its loaded modules, its BMC's GPUs and BIOS):

* ``build_installer``: a ``.run`` in the shape NVIDIA ships, a makeself-style self-extracting shell script
  (the header handles the archive's own options and refuses any option ``nvidia-installer`` does not know,
  then extracts the payload and runs its ``nvidia-installer``). The artifact server publishes it with its
  sha256, as a real mirror would.
* ``nvidia-installer`` (the payload's program asks the lab through ``/usr/libexec/nvidia-installer``): checks
  flags and prerequisites as the real one does, then the payload script registers and builds the module with
  ``dkms`` and loads it with ``modprobe`` - both shims below, so the calls are recorded as a real node makes them.
* ``dkms``, ``modprobe`` (only the NVIDIA modules; the rest stays with ``lab.metal.shims.interpret``),
  ``lsmod``, ``modinfo``, ``nvidia-smi`` (installed by the installer as ``/usr/bin/nvidia-smi``),
  ``mokutil``, ``update-initramfs`` and ``dracut``.

At boot (``modules_at_boot``), a host with GPUs loads ``nouveau`` unless ``/etc/modprobe.d`` blacklists it in
the initramfs it boots, and ``nvidia`` when a module is installed for the running kernel: the lab's kernel is the
controller's (``uname -r``), which the package shims' headers are named after.

Sources of the installer's options: NVIDIA/nvidia-installer ``option_table.h`` (the flags ``nvidia-installer
--advanced-options`` prints: ``--silent``, ``--dkms``, ``--kernel-name``, ``--no-nouveau-check``, ...) and, for
``--kernel-module-type=proprietary|open`` (installers of the 560 series and later), the driver README chapter
"Installing the NVIDIA Driver" and the CUDA Installation Guide for Linux, "Runfile Installation". The archive's
own options (``--extract-only``, ``--target``, ``--keep``, ``--check``, ``--info``, ``--list``) are makeself's
(https://makeself.io) as the NVIDIA ``.run`` keeps them.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.kube.gpu import PRODUCTS
from lab.metal import packages as _packages
from lab.metal.shims import Effect, ShimHost, interpret, register

# The lab's default stand-in driver: a 580 release (the last branch with Volta; the r730's V100s need it).
DRIVER_VERSION = "580.126.20"
ARCH = "x86_64"
DRIVER_CUDA_VERSION = "13.0"
STATE_DIR = "/var/lib/metal-lab"
MODULES_DB = f"{STATE_DIR}/nvidia-modules.json"  # kernel -> the nvidia module installed for it
DKMS_DB = f"{STATE_DIR}/dkms.json"  # "<module>/<version>" -> {source, flavour, kernels: {kernel: state}}
INITRAMFS_DB = f"{STATE_DIR}/initramfs.json"  # the modprobe.d blacklists the last initramfs was built with
PERSISTENCE = f"{STATE_DIR}/nvidia-persistence.json"  # boot id -> persistence mode set by nvidia-smi -pm 1
MODPROBE_DIRS = ("/etc/modprobe.d", "/usr/lib/modprobe.d")
SMI_LINK = "/usr/bin/nvidia-smi"
LAB_INSTALLER = "/usr/libexec/nvidia-installer"  # the lab end of the payload's nvidia-installer
NVIDIA_MODULES = ("nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem")
FLAVOURS = ("proprietary", "open")
# Architectures the open flavour cannot drive (the driver README, "Kernel Modules": Maxwell, Pascal, Volta).
OPEN_UNSUPPORTED = ("Maxwell", "Pascal", "Volta")
FLAVOUR_SOURCE = {"proprietary": "kernel", "open": "kernel-open"}  # the .run's directories of module sources
FLAVOUR_MARK = re.compile(r"^# metal-lab: kernel module type (\w+)$", re.MULTILINE)
PERSISTENCED = "nvidia-persistenced"

# ------------------------------------------------------------------------------------- the installer's flags
# nvidia-installer's options (option_table.h): name -> takes a value. nvgetopt accepts --name=value and
# --name value; boolean options (NVGETOPT_IS_BOOLEAN) also take --no-<name>.
INSTALLER_OPTIONS: dict[str, bool] = {
    "accept-license": False,
    "silent": False,
    "no-questions": False,
    "ui": True,
    "expert": False,
    "dkms": False,
    "no-dkms": False,
    "kernel-module-type": True,
    "kernel-name": True,
    "kernel-source-path": True,
    "kernel-output-path": True,
    "kernel-install-path": True,
    "no-precompiled-interface": False,
    "no-nouveau-check": False,
    "disable-nouveau": False,
    "no-x-check": False,
    "no-opengl-files": False,
    "no-wine-files": False,
    "no-kernel-module": False,
    "no-kernel-module-source": False,
    "kernel-module-only": False,
    "skip-module-load": False,
    "skip-depmod": False,
    "no-drm": False,
    "no-peermem": False,
    "no-unified-memory": False,
    "no-distro-scripts": False,
    "no-cc-version-check": False,
    "no-rpms": False,
    "no-backup": False,
    "no-check-for-alternate-installs": False,
    "no-nvidia-modprobe": False,
    "install-compat32-libs": False,
    "no-install-compat32-libs": False,
    "install-libglvnd": False,
    "no-install-libglvnd": False,
    "systemd": False,
    "no-systemd": False,
    "log-file-name": True,
    "tmpdir": True,
    "concurrency-level": True,
    "module-signing-secret-key": True,
    "module-signing-public-key": True,
    "uninstall": False,
    "version": False,
    "help": False,
    "advanced-options": False,
}
SHORT_OPTIONS = {
    "-a": "accept-license",
    "-s": "silent",
    "-q": "no-questions",
    "-e": "expert",
    "-k": "kernel-name",
    "-n": "no-precompiled-interface",
    "-z": "no-nouveau-check",
    "-Z": "disable-nouveau",
    "-K": "kernel-module-only",
    "-j": "concurrency-level",
    "-v": "version",
    "-h": "help",
    "-A": "advanced-options",
}
# The archive's own options (makeself), handled by the .run's header before nvidia-installer runs.
RUN_OPTIONS: dict[str, bool] = {
    "extract-only": False,
    "x": False,
    "target": True,
    "keep": False,
    "check": False,
    "info": False,
    "list": False,
}


class InstallerUsage(ValueError):
    """An option nvidia-installer would refuse; the message is the installer's."""


@dataclass
class InstallerArgs:
    options: dict[str, str | bool] = field(default_factory=dict)

    def has(self, name: str) -> bool:
        return bool(self.options.get(name))

    def value(self, name: str) -> str | None:
        value = self.options.get(name)
        return value if isinstance(value, str) else None


def parse_installer_args(argv: list[str]) -> InstallerArgs:
    """nvidia-installer's command line, as nvgetopt reads it; raises ``InstallerUsage`` on what it refuses."""
    args = InstallerArgs()
    words = list(argv)
    while words:
        word = words.pop(0)
        if word in SHORT_OPTIONS:
            name, value = SHORT_OPTIONS[word], None
        elif word.startswith("--"):
            name, _eq, given = word[2:].partition("=")
            value = given if _eq else None
        else:
            raise InstallerUsage(f'ERROR: Unrecognized option: "{word}"')
        if name not in INSTALLER_OPTIONS:
            raise InstallerUsage(f'ERROR: Unrecognized option: "{word}"')
        if INSTALLER_OPTIONS[name]:
            if value is None:
                if not words:
                    raise InstallerUsage(f'ERROR: Option "{word}" requires an argument.')
                value = words.pop(0)
            args.options[name] = value
        elif value is not None:
            raise InstallerUsage(f'ERROR: Option "--{name}" does not take an argument.')
        else:
            args.options[name] = True
    module_type = args.value("kernel-module-type")
    if module_type is not None and module_type not in FLAVOURS:
        raise InstallerUsage(
            f'ERROR: Invalid kernel module type "{module_type}"; valid types are: {", ".join(FLAVOURS)}'
        )
    if args.has("ui") and args.value("ui") not in ("none", "ncurses"):
        raise InstallerUsage(f'ERROR: Invalid value "{args.value("ui")}" for "--ui": valid are ncurses, none')
    return args


# ---------------------------------------------------------------------------------------- the .run archive
HEADER = r"""#!/bin/sh
# NVIDIA-Linux-@ARCH@-@VERSION@.run: the metal lab's stand-in for NVIDIA's self-extracting driver installer
# (a makeself archive: this header, then a gzip'd tar of NVIDIA-Linux-@ARCH@-@VERSION@/).
skip=@SKIP@
sha256=@SHA256@
label="NVIDIA Accelerated Graphics Driver for Linux-@ARCH@ @VERSION@"
target=""; extract_only=0; keep=0; pass=""
quote() { printf "'%s' " "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
payload() { tail -n +"$skip" "$0"; }
while [ $# -gt 0 ]; do
  opt="$1"; name="${opt#--}"; name="${name%%=*}"
  case "$opt" in
    -x|--extract-only) extract_only=1 ;;
    --keep) keep=1 ;;
    --target) target="$2"; shift ;;
    --target=*) target="${opt#--target=}" ;;
    --info) echo "Identification: $label"; echo "Target directory: NVIDIA-Linux-@ARCH@-@VERSION@"; exit 0 ;;
    --list) payload | tar tzf -; exit $? ;;
    --check)
      got=$(payload | sha256sum | cut -d' ' -f1)
      if [ "$got" = "$sha256" ]; then echo "Verifying archive integrity... OK"; exit 0; fi
      echo "Verifying archive integrity... Error in check sums $got $sha256" >&2; exit 1 ;;
@CASES@
    *) echo "ERROR: Unrecognized option: \"$opt\"" >&2; echo "Run '$0 --help' for usage." >&2; exit 1 ;;
  esac
  shift
done
got=$(payload | sha256sum | cut -d' ' -f1)
if [ "$got" != "$sha256" ]; then echo "Verifying archive integrity... Error in check sums" >&2; exit 1; fi
dir="${target:-${TMPDIR:-/tmp}/makeself.$$}"
mkdir -p "$dir" || exit 1
payload | tar xzf - -C "$dir" || { echo "Extraction failed" >&2; exit 1; }
if [ "$extract_only" = 1 ]; then echo "Creating directory NVIDIA-Linux-@ARCH@-@VERSION@ in $dir"; exit 0; fi
cd "$dir/NVIDIA-Linux-@ARCH@-@VERSION@" || exit 1
eval "sh ./nvidia-installer $pass"
rc=$?
cd / && [ "$keep" = 1 ] || [ -n "$target" ] || rm -rf "$dir"
exit $rc
"""

PAYLOAD_INSTALLER = r"""#!/bin/sh
# nvidia-installer (metal lab stand-in): the lab checks the options and prerequisites as the real one does and
# answers the plan; the steps a real installer takes on the node are then run here, as the node's commands.
plan=$(@LAB@ @VERSION@ "$@") || { rc=$?; [ -n "$plan" ] && echo "$plan" >&2; exit $rc; }
eval "$plan"
[ "$EXIT" = 1 ] && { printf '%s' "$MESSAGE"; exit 0; }
here=$(pwd)
if [ "$DKMS" = 1 ]; then
  rm -rf "/usr/src/nvidia-$VERSION" && mkdir -p "/usr/src/nvidia-$VERSION" || exit 1
  cp -r "$here/$SOURCE/." "/usr/src/nvidia-$VERSION/" || exit 1
  dkms add -m nvidia -v "$VERSION" >/dev/null || exit 1
  dkms build -m nvidia -v "$VERSION" -k "$KERNEL" >/dev/null || exit 1
  dkms install -m nvidia -v "$VERSION" -k "$KERNEL" >/dev/null || exit 1
fi
mkdir -p /usr/bin && ln -sf /usr/libexec/nvidia-smi /usr/bin/nvidia-smi || exit 1
mkdir -p /var/log && echo "nvidia-installer $VERSION ($TYPE) for $KERNEL" >> /var/log/nvidia-installer.log
if [ "$LOAD" = 1 ]; then
  modprobe nvidia || { echo "ERROR: Unable to load the 'nvidia' kernel module." >&2; exit 1; }
fi
exit 0
"""

DKMS_CONF = """# dkms.conf of the metal lab's stand-in NVIDIA driver {version}
# metal-lab: kernel module type {flavour}
PACKAGE_NAME="nvidia"
PACKAGE_VERSION="{version}"
AUTOINSTALL="yes"
BUILT_MODULE_NAME[0]="nvidia"
DEST_MODULE_LOCATION[0]="/kernel/drivers/video"
BUILT_MODULE_NAME[1]="nvidia-uvm"
DEST_MODULE_LOCATION[1]="/kernel/drivers/video"
"""


def _payload(version: str) -> bytes:
    top = f"NVIDIA-Linux-{ARCH}-{version}"
    program = PAYLOAD_INSTALLER.replace("@LAB@", LAB_INSTALLER).replace("@VERSION@", version)
    files: dict[str, tuple[bytes, int]] = {
        "nvidia-installer": (program.encode(), 0o755),
        ".manifest": (f"NVIDIA {version} metal lab stand-in\n".encode(), 0o644),
        "README.txt": (f"The metal lab's stand-in for the NVIDIA Linux driver {version}.\n".encode(), 0o644),
    }
    for flavour, directory in FLAVOUR_SOURCE.items():
        files[f"{directory}/dkms.conf"] = (DKMS_CONF.format(version=version, flavour=flavour).encode(), 0o644)
    out = io.BytesIO()
    # gzip without a timestamp, so the same version always has the same sha256 (the role caches by it)
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed, tarfile.open(fileobj=packed, mode="w") as tar:
        for name, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime = len(content), mode, 0
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


def _cases() -> str:
    lines = []
    for name, takes in sorted(INSTALLER_OPTIONS.items()):
        shorts = [s for s, n in SHORT_OPTIONS.items() if n == name]
        pattern = "|".join([f"--{name}", *shorts])
        if takes:
            lines.append(f'    {pattern}) pass="$pass$(quote "$1")$(quote "$2")"; shift ;;')
            lines.append(f'    --{name}=*) pass="$pass$(quote "$1")" ;;')
        else:
            lines.append(f'    {pattern}) pass="$pass$(quote "$1")" ;;')
    return "\n".join(lines)


def build_installer(path: Path, version: str = DRIVER_VERSION) -> str:
    """Write the stand-in ``NVIDIA-Linux-x86_64-<version>.run`` at ``path``; return its sha256."""
    payload = _payload(version)
    header = (
        HEADER.replace("@ARCH@", ARCH)
        .replace("@VERSION@", version)
        .replace("@SHA256@", hashlib.sha256(payload).hexdigest())
        .replace("@CASES@", _cases())
    )
    header = header.replace("@SKIP@", str(header.count("\n") + 1))
    blob = header.encode() + payload
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    path.chmod(0o755)
    return hashlib.sha256(blob).hexdigest()


def installer_name(version: str = DRIVER_VERSION) -> str:
    return f"NVIDIA-Linux-{ARCH}-{version}.run"


# ------------------------------------------------------------------------------------------ host state
def _read_json(host: ShimHost, inside: str) -> dict[str, Any]:
    try:
        value = json.loads(host.disk.host_path(inside).read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _write_json(host: ShimHost, inside: str, value: dict[str, Any]) -> None:
    host.disk.write(inside, json.dumps(value, indent=2, sort_keys=True).encode())


def running_kernel() -> str:
    """The simulated hosts run the controller's kernel (their /proc is the real one)."""
    return os.uname().release


def package_installed(host: ShimHost, name: str) -> bool:
    return _packages.installed(host, name) is not None


def headers_installed(host: ShimHost, kernel: str) -> bool:
    """Kernel headers for ``kernel``: Debian's ``linux-headers-<k>`` or EL's ``kernel-devel-<k>``."""
    return package_installed(host, f"linux-headers-{kernel}") or package_installed(host, f"kernel-devel-{kernel}")


def _service_active(host: ShimHost, unit: str) -> bool:
    return _packages.service_active(host, unit)


def secure_boot(host: ShimHost) -> bool:
    """Secure Boot as the host's BIOS has it (the BMC's Dell attribute or its DMTF SecureBoot resource)."""
    bmc = getattr(host, "bmc", None)
    bios = getattr(bmc, "bios", None) or {}
    return bios.get("SecureBoot") == "Enabled" or bool(getattr(bmc, "secure_boot_enable", False))


def gpu_products(host: ShimHost) -> list[Any]:
    by_name = {p.product_name: p for p in PRODUCTS.values()}
    return [by_name[name] for name in host.gpu_models if name in by_name]


def installed_module(host: ShimHost, kernel: str | None = None) -> dict[str, Any] | None:
    """The nvidia module installed for ``kernel`` (default: the running one): version, flavour, dkms."""
    entry = _read_json(host, MODULES_DB).get(kernel or running_kernel())
    return entry if isinstance(entry, dict) else None


def blacklisted(host: ShimHost) -> set[str]:
    """Modules a ``blacklist <name>`` line in a modprobe.d ``*.conf`` file names."""
    names: set[str] = set()
    for directory in MODPROBE_DIRS:
        folder = host.disk.host_path(directory)
        for conf in sorted(folder.glob("*.conf")) if folder.is_dir() else []:
            for line in conf.read_text(errors="replace").splitlines():
                words = line.split()
                if len(words) >= 2 and words[0] == "blacklist":
                    names.add(words[1])
    return names


def boot_blacklist(host: ShimHost) -> set[str]:
    """What the initramfs the host boots blacklists: as last rebuilt, else as installed (the OS installer's)."""
    record = _read_json(host, INITRAMFS_DB)
    if "blacklist" in record:
        return set(record["blacklist"])
    return blacklisted(host)


def load_problem(host: ShimHost, module: dict[str, Any] | None, modules: set[str]) -> str | None:
    """Why ``modprobe nvidia`` fails now (None when it loads)."""
    kernel = running_kernel()
    if module is None:
        return f"modprobe: FATAL: Module nvidia not found in directory /lib/modules/{kernel}\n"
    if "nouveau" in modules:
        return "modprobe: ERROR: could not insert 'nvidia': No such device (nouveau is bound to the GPUs)\n"
    if secure_boot(host):
        return "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n"
    if module.get("flavour") == "open" and any(p.architecture in OPEN_UNSUPPORTED for p in gpu_products(host)):
        return "modprobe: ERROR: could not insert 'nvidia': No such device (the open module does not drive Volta)\n"
    return None


def modules_at_boot(host: ShimHost) -> set[str]:
    """What a booting host loads on its own: nouveau for its GPUs unless blacklisted, else an installed nvidia."""
    if not host.gpu_models:
        return set()
    if "nouveau" not in boot_blacklist(host):
        return {"nouveau"}
    if load_problem(host, installed_module(host), set()) is None:
        return {"nvidia"}
    return set()


def persistence_on(host: ShimHost) -> bool:
    """Persistence mode: the daemon running, or ``nvidia-smi -pm 1`` since this boot (it does not survive one)."""
    if "nvidia" not in host.modules:
        return False
    if _service_active(host, PERSISTENCED):
        return True
    return _read_json(host, PERSISTENCE).get("boot") == _boot_id(host)


def _boot_id(host: ShimHost) -> str:
    return str(getattr(host, "boot_id", None) or "")


# ----------------------------------------------------------------------------------------- nvidia-installer
def _answer(**values: str | int) -> str:
    return "".join(f"{k}='{str(v).replace(chr(39), '')}'\n" for k, v in values.items())


HELP = (
    "nvidia-installer [options]\n\n  -a, --accept-license\n  -s, --silent\n  --dkms\n"
    "  --kernel-module-type=KERNEL-MODULE-TYPE  proprietary or open\n  -k KERNEL-NAME, --kernel-name=KERNEL-NAME\n"
)


def installer_shim(argv: list[str], host: ShimHost) -> Effect:  # noqa: PLR0911
    """The lab end of the payload's ``nvidia-installer`` (``argv[1]`` is the payload's version, baked in when the
    lab built it): refuse as the real one would, else answer the plan as shell assignments."""
    if len(argv) < 2 or not re.fullmatch(r"\d+\.\d+(?:\.\d+)?", argv[1]):
        return Effect(rc=1, stderr="nvidia-installer: run it from the .run installer's payload\n")
    version = argv[1]
    try:
        args = parse_installer_args(argv[2:])
    except InstallerUsage as exc:
        return Effect(rc=1, stderr=f"{exc}\n")
    if args.has("help") or args.has("advanced-options"):
        return Effect(stdout=_answer(EXIT=1, MESSAGE=HELP))
    if args.has("version"):
        return Effect(stdout=_answer(EXIT=1, MESSAGE=f"nvidia-installer:  version {version}\n"))
    if args.has("uninstall"):
        return Effect(rc=1, stderr="ERROR: --uninstall is not simulated in the metal lab\n")
    if not (args.has("silent") or (args.has("no-questions") and args.value("ui") == "none")):
        return Effect(
            rc=1,
            stderr="ERROR: Unable to initialize the ncurses user interface and no terminal to ask questions on; "
            "run with --silent\n",
        )
    running = running_kernel()
    kernel = args.value("kernel-name") or running
    for tool in ("gcc", "make"):
        if not package_installed(host, tool):
            return Effect(
                rc=1,
                stderr=f"ERROR: Unable to find the development tool `{'cc' if tool == 'gcc' else tool}` in your "
                f"path; please make sure that you have the package '{tool}' installed.\n",
            )
    if not headers_installed(host, kernel):
        return Effect(
            rc=1,
            stderr=f"ERROR: Unable to find the kernel source tree for the kernel {kernel}. Please make sure you "
            "have installed the kernel source files for your kernel (linux-headers / kernel-devel).\n",
        )
    dkms = args.has("dkms") and not args.has("no-dkms")
    if dkms and not package_installed(host, "dkms"):
        return Effect(rc=1, stderr="ERROR: Failed to run `dkms`: the dkms package is not installed.\n")
    if "nouveau" in host.modules and not args.has("no-nouveau-check"):
        if args.has("disable-nouveau"):
            host.disk.write(
                "/etc/modprobe.d/nvidia-installer-disable-nouveau.conf",
                b"# generated by nvidia-installer\nblacklist nouveau\noptions nouveau modeset=0\n",
            )
        return Effect(
            rc=1,
            stderr="ERROR: The Nouveau kernel driver is currently in use by your system. This driver is "
            "incompatible with the NVIDIA driver, and must be disabled before proceeding.\n",
        )
    flavour = args.value("kernel-module-type") or _default_flavour(host)
    load = kernel == running and not args.has("skip-module-load")
    unload = ""
    if kernel == running and "nvidia" in host.modules:
        if persistence_on(host):
            return Effect(
                rc=1,
                stderr="ERROR: An NVIDIA kernel module 'nvidia' appears to be already loaded in your kernel. This "
                "may be because it is in use (for example, by an X server, a CUDA program, or the NVIDIA "
                "Persistence Daemon).\n",
            )
        unload = " ".join(m for m in NVIDIA_MODULES if m in host.modules)
    if load:
        problem = load_problem(host, {"flavour": flavour}, host.modules - set(NVIDIA_MODULES))
        if problem:
            return Effect(rc=1, stderr=f"ERROR: Unable to load the kernel module 'nvidia.ko': {problem}")
    if not dkms:  # without DKMS the installer builds and installs the module itself
        _install_module(host, kernel, version, flavour, via_dkms=False)
    plan = _answer(
        EXIT=0, VERSION=version, TYPE=flavour, KERNEL=kernel, DKMS=int(dkms), LOAD=int(load),
        SOURCE=FLAVOUR_SOURCE[flavour],
    )  # fmt: skip
    return Effect(stdout=plan, action="unload" if unload else None, target=unload or None)


def _default_flavour(host: ShimHost) -> str:
    """The 560+ installer's default: open, unless a GPU cannot run it."""
    products = gpu_products(host)
    return "proprietary" if any(p.architecture in OPEN_UNSUPPORTED for p in products) else "open"


def _install_module(host: ShimHost, kernel: str, version: str, flavour: str, *, via_dkms: bool) -> None:
    db = _read_json(host, MODULES_DB)
    db[kernel] = {"version": version, "flavour": flavour, "dkms": via_dkms}
    _write_json(host, MODULES_DB, db)
    host.disk.write(f"/usr/lib/modules/{kernel}/updates/dkms/nvidia.ko", f"nvidia {version} {flavour}\n".encode())


# -------------------------------------------------------------------------------------------------- dkms
def _dkms_options(words: list[str]) -> tuple[dict[str, str], list[str]]:
    options: dict[str, str] = {}
    rest: list[str] = []
    while words:
        word = words.pop(0)
        if word in ("-m", "-v", "-k", "--kernelsourcedir") and words:
            options[word] = words.pop(0)
        elif word.startswith("-"):
            continue
        else:
            rest.append(word)
    if "-m" not in options and rest and "/" in rest[0]:  # dkms 3: `dkms build nvidia/580.126.20`
        options["-m"], options["-v"] = rest.pop(0).split("/", 1)
    return options, rest


def dkms_shim(argv: list[str], host: ShimHost) -> Effect:  # noqa: PLR0911
    """``dkms add|build|install|autoinstall|status`` over the host's DKMS database."""
    if len(argv) < 2:
        return Effect(rc=1, stderr="Error! No action was specified.\n")
    action, (options, _rest) = argv[1], _dkms_options(argv[2:])
    db = _read_json(host, DKMS_DB)
    kernel = options.get("-k", running_kernel())
    if action == "status":
        return Effect(stdout=_dkms_status(db, options))
    if action == "autoinstall":
        for key in sorted(db):
            if not headers_installed(host, kernel):
                return Effect(rc=1, stderr=_no_headers(kernel))
            db[key].setdefault("kernels", {})[kernel] = "installed"
            module, version = key.split("/", 1)
            if module == "nvidia":
                _install_module(host, kernel, version, db[key]["flavour"], via_dkms=True)
        _write_json(host, DKMS_DB, db)
        return Effect()
    if "-m" not in options or "-v" not in options:
        return Effect(rc=1, stderr="Error! Arguments <module> and <module-version> are not specified.\n")
    key = f"{options['-m']}/{options['-v']}"
    if action == "add":
        conf = host.disk.host_path(f"/usr/src/{options['-m']}-{options['-v']}/dkms.conf")
        if not conf.is_file():
            return Effect(rc=1, stderr=f"Error! Could not find module source directory.\nDirectory: "
                          f"/usr/src/{options['-m']}-{options['-v']} does not exist.\n")  # fmt: skip
        mark = FLAVOUR_MARK.search(conf.read_text())
        db.setdefault(key, {"kernels": {}})["flavour"] = mark.group(1) if mark else "proprietary"
        _write_json(host, DKMS_DB, db)
        return Effect(stdout=f"Creating symlink /var/lib/dkms/{options['-m']}/{options['-v']}/source\n")
    if key not in db:
        return Effect(rc=3, stderr=f"Error! The module/version combo: {key} is not located in the DKMS tree.\n")
    if action == "build":
        for tool in ("gcc", "make"):
            if not package_installed(host, tool):
                return Effect(rc=1, stderr=f"Error! Bad return status for module build on kernel: {kernel}: "
                              f"{tool} not found\n")  # fmt: skip
        if not headers_installed(host, kernel):
            return Effect(rc=1, stderr=_no_headers(kernel))
        db[key]["kernels"][kernel] = "built"
    elif action == "install":
        if db[key]["kernels"].get(kernel) not in ("built", "installed"):
            return Effect(rc=1, stderr=f"Error! {key} is not built for kernel {kernel}\n")
        db[key]["kernels"][kernel] = "installed"
        if options["-m"] == "nvidia":
            _install_module(host, kernel, options["-v"], db[key]["flavour"], via_dkms=True)
    else:
        return Effect(rc=1, stderr=f"Error! Unknown action: {action} (not simulated in the metal lab)\n")
    _write_json(host, DKMS_DB, db)
    return Effect()


def _no_headers(kernel: str) -> str:
    return (
        f"Error! Your kernel headers for kernel {kernel} cannot be found at /lib/modules/{kernel}/build or "
        f"/lib/modules/{kernel}/source.\n"
    )


def _dkms_status(db: dict[str, Any], options: dict[str, str]) -> str:
    lines = []
    for key in sorted(db):
        module, version = key.split("/", 1)
        if options.get("-m") not in (None, module):
            continue
        kernels = db[key].get("kernels") or {}
        if not kernels:
            lines.append(f"{key}: added")
        for kernel, state in sorted(kernels.items()):
            if options.get("-k") in (None, kernel):
                lines.append(f"{module}/{version}, {kernel}, {ARCH}: {state}")
    return "".join(f"{line}\n" for line in lines)


# ------------------------------------------------------------------------------------ modprobe and friends
def _normal(name: str) -> str:
    return name.replace("-", "_")


def modprobe_shim(argv: list[str], host: ShimHost) -> Effect:
    """The NVIDIA modules need an installed module that can drive the GPUs; the rest as ``interpret`` has it."""
    args = argv[1:]
    names = [_normal(a) for a in args if not a.startswith("-")]
    remove = "-r" in args or "--remove" in args
    if not names or not any(n in NVIDIA_MODULES for n in names):
        return interpret(argv, lambda _device: False)
    if remove:
        if persistence_on(host):
            return Effect(rc=1, stderr="modprobe: FATAL: Module nvidia is in use.\n")
        loaded = [m for m in NVIDIA_MODULES if m in host.modules]
        return Effect(action="unload", target=" ".join(loaded)) if loaded else Effect()
    problem = load_problem(host, installed_module(host), host.modules)
    if problem:
        return Effect(rc=1, stderr=problem)
    return Effect(action="load", target=" ".join(names))


def lsmod_shim(_argv: list[str], host: ShimHost) -> Effect:
    rows = "".join(f"{name:<24}{16384:>8}  0\n" for name in sorted(host.modules))
    return Effect(stdout=f"Module                  Size  Used by\n{rows}")


def modinfo_shim(argv: list[str], host: ShimHost) -> Effect:
    names = [_normal(a) for a in argv[1:] if not a.startswith("-")]
    field_name = argv[argv.index("-F") + 1] if "-F" in argv[:-1] else None
    if not names or names[-1] not in NVIDIA_MODULES or field_name in names[-1:]:
        name = names[-1] if names else ""
        return Effect(rc=1, stderr=f"modinfo: ERROR: Module {name} not found.\n")
    module = installed_module(host)
    if module is None:
        return Effect(rc=1, stderr=f"modinfo: ERROR: Module {names[-1]} not found.\n")
    license_text = "Dual MIT/GPL" if module.get("flavour") == "open" else "NVIDIA"
    values = {"license": license_text, "version": str(module.get("version"))}
    if field_name:
        return Effect(stdout=f"{values.get(field_name, '')}\n")
    return Effect(stdout="".join(f"{k + ':':<16}{v}\n" for k, v in values.items()))


def mokutil_shim(argv: list[str], host: ShimHost) -> Effect:
    if "--sb-state" in argv:
        return Effect(stdout=f"SecureBoot {'enabled' if secure_boot(host) else 'disabled'}\n")
    return Effect(rc=1, stderr="mokutil: only --sb-state is simulated in the metal lab\n")


def initramfs_shim(argv: list[str], host: ShimHost) -> Effect:
    """``update-initramfs -u|-c`` (Debian) and ``dracut -f`` (EL): the image takes today's modprobe.d blacklists."""
    name, args = argv[0], argv[1:]
    if name == "update-initramfs" and not {"-u", "-c"} & set(args):
        return Effect(rc=1, stderr="Usage: update-initramfs {-c|-d|-u} [-k version] [-v] [-b directory]\n")
    _write_json(host, INITRAMFS_DB, {"blacklist": sorted(blacklisted(host)), "by": name})
    return Effect(stdout=f"{name}: Generating /boot/initrd.img-{running_kernel()}\n")


# ---------------------------------------------------------------------------------------------- nvidia-smi
SMI_FAILED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
    "NVIDIA driver is installed and running.\n"
)


def _gpus(host: ShimHost) -> list[dict[str, Any]]:
    gpus = []
    for index, product in enumerate(gpu_products(host)):
        bus = f"00000000:{0x04 + index * 0x80:02X}:00.0"
        gpus.append(
            {
                "index": index,
                "bus": bus,
                "product": product,
                "uuid": f"GPU-{hashlib.sha256(f'{host.name}/{index}'.encode()).hexdigest()[:8]}-0000-0000-0000-"
                f"{index:012d}",
            }
        )
    return gpus


PCI_DEVICE_IDS = {"Tesla V100-PCIE-16GB": "1DB410DE", "Tesla V100-PCIE-32GB": "1DB610DE"}


def smi_xml(host: ShimHost, version: str, persistence: bool) -> str:
    """``nvidia-smi -q -x``: the elements the collection's parsers read, in the driver-580 document's order."""
    rows = []
    for gpu in _gpus(host):
        product = gpu["product"]
        rows.append(
            f"""\t<gpu id="{gpu["bus"]}">
\t\t<product_name>{product.product_name}</product_name>
\t\t<product_brand>Tesla</product_brand>
\t\t<product_architecture>{product.architecture}</product_architecture>
\t\t<persistence_mode>{"Enabled" if persistence else "Disabled"}</persistence_mode>
\t\t<uuid>{gpu["uuid"]}</uuid>
\t\t<minor_number>{gpu["index"]}</minor_number>
\t\t<gsp_firmware_version>N/A</gsp_firmware_version>
\t\t<pci>
\t\t\t<pci_device_id>{PCI_DEVICE_IDS.get(product.product_name, "00000000")}</pci_device_id>
\t\t\t<pci_bus_id>{gpu["bus"]}</pci_bus_id>
\t\t</pci>
\t\t<fb_memory_usage>
\t\t\t<total>{product.memory_mib} MiB</total>
\t\t\t<used>0 MiB</used>
\t\t\t<free>{product.memory_mib} MiB</free>
\t\t</fb_memory_usage>
\t\t<bar1_memory_usage>
\t\t\t<total>{product.memory_mib * 2} MiB</total>
\t\t</bar1_memory_usage>
\t</gpu>
"""
        )
    return (
        '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">\n<nvidia_smi_log>\n'
        f"\t<driver_version>{version}</driver_version>\n\t<cuda_version>{DRIVER_CUDA_VERSION}</cuda_version>\n"
        f"\t<attached_gpus>{len(rows)}</attached_gpus>\n{''.join(rows)}</nvidia_smi_log>\n"
    )


def smi_banner(host: ShimHost, version: str, persistence: bool) -> str:
    """Plain ``nvidia-smi``: the banner and one two-line block per GPU, as driver 580 prints them."""
    rule = "+-----------------------------------------+------------------------+----------------------+"
    lines = [
        "+" + "-" * 89 + "+",
        f"| NVIDIA-SMI {version:<22} Driver Version: {version:<14} CUDA Version: {DRIVER_CUDA_VERSION:<9}|",
        rule,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        rule.replace("-", "="),
    ]
    for gpu in _gpus(host):
        product = gpu["product"]
        lines.append(
            f"| {gpu['index']:>3}  {product.product_name:<28}{'On' if persistence else 'Off':>4}  |"
            f"   {gpu['bus']} Off |                    0 |"
        )
        lines.append(f"| N/A   30C    P0             25W /  250W |       0MiB / {product.memory_mib:>6}MiB |"
                     "      0%      Default |")  # fmt: skip
        lines.append(rule)
    return "\n".join(lines) + "\n"


def nvidia_smi_shim(argv: list[str], host: ShimHost) -> Effect:
    module = installed_module(host)
    if "nvidia" not in host.modules or module is None:
        return Effect(rc=9, stdout=SMI_FAILED)
    args = argv[1:]
    version = str(module.get("version"))
    if "-pm" in args or "--persistence-mode" in args[:1]:
        value = args[args.index("-pm") + 1] if "-pm" in args[:-1] else ""
        if value not in ("0", "1", "ENABLED", "DISABLED"):
            return Effect(rc=2, stderr="Invalid combination of input arguments. Please run 'nvidia-smi -h'.\n")
        on = value in ("1", "ENABLED")
        _write_json(host, PERSISTENCE, {"boot": _boot_id(host) if on else None})
        return Effect(
            stdout="".join(
                f"{'Enabled' if on else 'Disabled'} persistence mode for GPU {g['bus']}.\n" for g in _gpus(host)
            )
        )
    if "-q" in args and "-x" in args:
        return Effect(stdout=smi_xml(host, version, persistence_on(host)))
    if not args:
        return Effect(stdout=smi_banner(host, version, persistence_on(host)))
    return Effect(rc=2, stderr=f"nvidia-smi {' '.join(args)}: not simulated in the metal lab\n")


register("nvidia-installer", "libexec", installer_shim)
register("nvidia-smi", "libexec", nvidia_smi_shim)  # on PATH once the installer links /usr/bin/nvidia-smi
register("dkms", "sbin", dkms_shim)
register("modprobe", "sbin", modprobe_shim)
register("lsmod", "bin", lsmod_shim)
register("modinfo", "sbin", modinfo_shim)
register("mokutil", "bin", mokutil_shim)
register("update-initramfs", "sbin", initramfs_shim)
register("dracut", "bin", initramfs_shim)
