"""Simulated hosts install what their ISO configures and come up (or not) as a real server would (lab.metal).

Each case drives a real ``BmcState`` (the generic BMC, whose ``Cd`` override boots the virtual CD;
one case uses the iDRAC8's) at delay scale 0, serves its ISO from the lab's artifact server, and
checks the host with the real OpenSSH client against a pinned ``known_hosts``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncssh
import pytest

from lab.common.artifacts import ArtifactServer
from lab.metal import testiso
from lab.metal.fleet import MetalFleet
from lab.metal.host import MetalHost
from lab.metal.sandbox import SandboxUnavailable, probe
from lab.metal.testiso import HostSpec
from lab.redfish.bmc import BmcSpec, BmcState

WAIT = 120.0  # seconds; every transition is instant at delay scale 0, this only bounds a failure
SSH = "/usr/bin/ssh"
CASES = (
    "good",
    "wrong-mac",
    "dhcp",
    "wrong-address",
    "wrong-gateway",
    "no-gateway",
    "no-key",
    "prompt",
    "loop",
    "halt",
    "wrong-disk",
    "commands",
)


@dataclass
class Lab:
    fleet: MetalFleet
    artifacts: ArtifactServer
    client_key: Path
    tmp: Path
    states: dict[str, BmcState]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.artifacts.server.server_address[1]}/{name}.iso"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    try:
        probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"the host sandboxes cannot run here: {exc}")
    tmp = tmp_path_factory.mktemp("metal")
    states = {name: BmcState(BmcSpec(name=name, personality="generic"), delay_scale=0.0) for name in CASES}
    states["idrac8"] = BmcState(BmcSpec(name="idrac8", personality="idrac8"), delay_scale=0.0)
    key = asyncssh.generate_private_key("ssh-ed25519")
    (tmp / "id").write_bytes(key.export_private_key())
    (tmp / "id").chmod(0o600)
    (tmp / "id.pub").write_bytes(key.export_public_key())
    with ArtifactServer(root=tmp / "artifacts") as artifacts, MetalFleet(states, tmp / "state", 0.0) as fleet:
        yield Lab(fleet, artifacts, tmp / "id", tmp, states)


def host_key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519")


def spec_for(lab: Lab, name: str, key: asyncssh.SSHKey | None = None, **changes: object) -> HostSpec:
    identity = lab.fleet.host(name).identity
    values: dict[str, object] = {
        "mac": identity.boot_mac,
        "address": identity.address,
        "gateway": identity.gateway,
        "authorized_key": (lab.tmp / "id.pub").read_text().strip(),
    }
    if key is not None:
        values["host_key"] = key.export_private_key().decode()
        values["host_key_pub"] = key.export_public_key().decode()
    values.update(changes)
    return HostSpec(**values)  # type: ignore[arg-type]


def boot_iso(lab: Lab, name: str, files: dict[str, bytes], *, every_boot: bool = False, **build: object) -> MetalHost:
    """Insert the ISO in the virtual CD, boot it (once, or on every boot), power on."""
    testiso.build_iso(lab.artifacts.root / f"{name}.iso", files, **build)  # type: ignore[arg-type]
    state = lab.states[name]
    with state.lock:
        slot = next(s for s in state.slots.values() if "CD" in s.media_types)
        slot.inserted, slot.image = True, lab.url(name)
        state.override_target, state.override_enabled = "Cd", "Continuous" if every_boot else "Once"
    if state.power_state == "On":
        state.reset_system("ForceRestart")
    else:
        state.reset_system("On")
    return lab.fleet.host(name)


def wait(host: MetalHost, predicate: Callable[[MetalHost], bool], what: str) -> None:
    assert host.wait_for(predicate, WAIT), f"{host.name}: {what}; now {host.phase} ({host.reason}, {host.unreachable})"


def power_on_from_disk(lab: Lab, name: str) -> MetalHost:
    host = lab.fleet.host(name)
    wait(host, lambda h: h.bmc.power_state == "Off", "powered off after the install")
    lab.states[name].reset_system("On")
    wait(host, lambda h: h.phase == "os-up", "the installed OS comes up")
    return host


def ssh(
    lab: Lab, host: MetalHost, command: str, key: asyncssh.SSHKey | None, user: str = "root"
) -> subprocess.CompletedProcess[str]:
    known = lab.tmp / f"known_hosts-{host.name}"
    ident = host.identity
    known.write_text(f"[{ident.address}]:{ident.port} {key.export_public_key().decode()}" if key else "")
    options = ["BatchMode=yes", "IdentitiesOnly=yes", "ConnectTimeout=30", f"UserKnownHostsFile={known}"]
    options += ["StrictHostKeyChecking=yes", "GlobalKnownHostsFile=/dev/null"]
    argv = [SSH, "-i", str(lab.client_key), "-p", str(ident.port), *(a for o in options for a in ("-o", o))]
    return subprocess.run(
        [*argv, f"{user}@{ident.address}", command], capture_output=True, text=True, timeout=60, check=False
    )


# (case, how the configuration differs from a good one, why the installed host is unreachable)
UNREACHABLE = [
    ("wrong-mac", {"mac": "f8:bc:12:00:00:01"}, "no network configuration for the boot NIC"),
    ("wrong-address", {"address": "127.77.0.99"}, "configured with 127.77.0.99"),
    ("wrong-gateway", {"gateway": "127.77.0.254"}, "default gateway is 127.77.0.254"),
    ("no-gateway", {"gateway": None}, "default gateway is not set"),
]


@pytest.mark.parametrize(("name", "changes", "why"), UNREACHABLE, ids=[c[0] for c in UNREACHABLE])
def test_a_bad_network_installs_an_unreachable_host(lab: Lab, name: str, changes: dict[str, object], why: str) -> None:
    boot_iso(lab, name, testiso.kickstart_files(spec_for(lab, name, **changes)))
    host = power_on_from_disk(lab, name)
    assert host.unreachable is not None
    assert why in host.unreachable
    result = ssh(lab, host, "true", None)
    assert result.returncode == 255
    assert "Connection refused" in result.stderr


def test_dhcp_gets_no_address_on_the_lab_network(lab: Lab) -> None:
    files = testiso.kickstart_files(spec_for(lab, "dhcp"))
    text = files["/ks.cfg"].decode().replace("--bootproto=static", "--bootproto=dhcp")
    boot_iso(lab, "dhcp", {**files, "/ks.cfg": text.encode()})
    host = power_on_from_disk(lab, "dhcp")
    assert host.unreachable is not None
    assert "no DHCP server" in host.unreachable


def test_a_good_configuration_installs_powers_off_and_answers_ssh_with_its_keys(lab: Lab) -> None:
    key = host_key()
    host = boot_iso(lab, "good", testiso.kickstart_files(spec_for(lab, "good", key)))
    wait(host, lambda h: len(h.log.installs) == 1 and h.bmc.power_state == "Off", "installed and powered off")
    assert [b["device"] for b in host.log.boots] == ["VirtualCD"]
    power_on_from_disk(lab, "good")
    assert [b["device"] for b in host.log.boots] == ["VirtualCD", "Hdd"]
    result = ssh(lab, host, "hostname; cat /etc/metalplane/provisioned; cat /sys/class/net/eno1/address", key)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["node1", "lab-build-1", host.identity.boot_mac]
    assert ssh(lab, host, "true", host_key()).returncode == 255  # another host key: the pin refuses it


def test_a_configuration_without_an_authorized_key_lets_nobody_in(lab: Lab) -> None:
    key = host_key()
    boot_iso(lab, "no-key", testiso.kickstart_files(spec_for(lab, "no-key", key, authorized_key=None)))
    host = power_on_from_disk(lab, "no-key")
    assert host.unreachable is None
    result = ssh(lab, host, "true", key)
    assert result.returncode == 255
    assert "Permission denied (publickey)" in result.stderr


# (case, files, what the host does instead of installing)
def _stops(lab: Lab) -> dict[str, tuple[dict[str, bytes], str, str]]:
    return {
        "prompt": (
            testiso.autoinstall_files(spec_for(lab, "prompt"), cmdline='"ds=nocloud;s=/cdrom/nocloud/"'),
            "installer-waiting",
            "Continue with autoinstall",
        ),
        "halt": (testiso.kickstart_files(spec_for(lab, "halt", poweroff=False)), "installer-halted", "waits for a key"),
        "wrong-disk": (
            testiso.kickstart_files(spec_for(lab, "wrong-disk", root_disk="/dev/disk/by-id/wwn-0x5000c500ffffffff")),
            "installer-failed",
            "only disk is /dev/sda",
        ),
    }


@pytest.mark.parametrize("name", ["prompt", "halt", "wrong-disk"])
def test_the_installer_stops_and_the_server_stays_on(lab: Lab, name: str) -> None:
    files, phase, says = _stops(lab)[name]
    host = boot_iso(lab, name, files, bios_boot="/boot/grub/i386-pc/eltorito.img" if name == "prompt" else None)
    wait(host, lambda h: h.phase == phase, f"reaches {phase}")
    assert host.reason is not None
    assert says in host.reason
    assert lab.states[name].power_state == "On"
    assert host.disk.installed is None or name == "halt"


def test_without_a_final_power_off_and_the_cd_first_it_installs_again_and_again(lab: Lab) -> None:
    files = testiso.autoinstall_files(spec_for(lab, "loop", poweroff=False))
    host = boot_iso(lab, "loop", files, every_boot=True, bios_boot="/boot/grub/i386-pc/eltorito.img")
    wait(host, lambda h: len(h.log.installs) >= 3, "installs three times")
    assert {b["device"] for b in host.log.boots} == {"VirtualCD"}
    lab.states["loop"].reset_system("ForceOff")
    wait(host, lambda h: h.phase == "off", "stops when forced off")


def test_idrac8_cd_override_boots_the_empty_physical_drive(lab: Lab) -> None:
    host = boot_iso(lab, "idrac8", testiso.kickstart_files(spec_for(lab, "idrac8")))
    wait(host, lambda h: h.phase == "no-boot-device", "finds nothing to boot")
    assert host.reason is not None
    assert "physical optical drive is empty" in host.reason


def test_os_commands_drive_the_bmc_and_a_reinstall_changes_the_host_key(lab: Lab) -> None:
    first = host_key()
    boot_iso(lab, "commands", testiso.kickstart_files(spec_for(lab, "commands", first)))
    host = power_on_from_disk(lab, "commands")
    boot_id = ssh(lab, host, "cat /proc/sys/kernel/random/boot_id", first).stdout.strip()
    assert boot_id == host.boot_id
    assert ssh(lab, host, "reboot", first).returncode == 0
    wait(host, lambda h: len(h.log.boots) == 3 and h.phase == "os-up", "boots again from disk")
    assert ssh(lab, host, "cat /proc/sys/kernel/random/boot_id", first).stdout.strip() not in ("", boot_id)
    assert ssh(lab, host, "wipefs -a /dev/sda && poweroff", first).returncode == 0
    wait(host, lambda h: h.bmc.power_state == "Off", "the OS powers the server off")
    assert [c.argv[0] for c in host.log.shim_calls] == ["reboot", "wipefs", "poweroff"]
    lab.states["commands"].reset_system("On")
    wait(host, lambda h: h.phase == "no-boot-device", "a wiped disk boots nothing")
    second = host_key()
    boot_iso(lab, "commands", testiso.kickstart_files(spec_for(lab, "commands", second)))
    power_on_from_disk(lab, "commands")
    assert ssh(lab, host, "true", first).returncode == 255
    assert ssh(lab, host, "true", second).returncode == 0
