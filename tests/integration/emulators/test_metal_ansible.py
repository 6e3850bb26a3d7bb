"""Ansible's ordinary ``ssh`` connection and modules work on a lab host installed over Redfish (lab.metal).

The whole path a user's playbook takes: sushy inserts a kickstart ISO into the lab BMC's virtual CD,
sets a one-time CD boot and powers on; the host installs what the ISO configures and powers off;
powered on again it boots from disk. Then a real ``ansible-playbook`` (OpenSSH client, SFTP
transfers, no pipelining) gathers facts, runs commands, copies a file and calls a shim, with
``known_hosts`` pinning the host key the ISO carried - and refuses a host with another key.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import pytest
import sushy
import yaml

from lab.common.artifacts import ArtifactServer
from lab.metal import testiso
from lab.metal.fleet import MetalFleet, status_lines
from lab.metal.host import MetalHost
from lab.metal.sandbox import SandboxUnavailable, probe
from lab.redfish.server import BmcSpec, RedfishLab

BMC = "gen-1"
WAIT = 60.0
# Host keys checked (the support helper turns it off for local plays); modules sent over SFTP, not
# piped; each run with its own ControlMaster directory, so no run rides on another's checked connection.
ENV = {"ANSIBLE_HOST_KEY_CHECKING": "true", "ANSIBLE_PIPELINING": "false"}


@dataclass
class Installed:
    host: MetalHost
    host_key: asyncssh.SSHKey
    client_key: Path
    tmp: Path
    status: list[str]  # what `labctl status` shows for the lab's hosts


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    try:
        probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"the host sandboxes cannot run here: {exc}")
    tmp = tmp_path_factory.mktemp("metal-ansible")
    client = asyncssh.generate_private_key("ssh-ed25519")
    (tmp / "id").write_bytes(client.export_private_key())
    (tmp / "id").chmod(0o600)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    with (
        RedfishLab(bmcs=[BmcSpec(name=BMC, personality="generic")], delay_scale=0.0, state_dir=tmp / "rf") as lab,
        MetalFleet(lab.states, tmp / "rf", delay_scale=0.0) as fleet,
        ArtifactServer(root=tmp / "artifacts") as artifacts,
    ):
        host = fleet.host(BMC)
        spec = testiso.HostSpec(
            mac=host.identity.boot_mac,
            address=host.identity.address,
            gateway=host.identity.gateway,
            authorized_key=client.export_public_key().decode().strip(),
            host_key=host_key.export_private_key().decode(),
            host_key_pub=host_key.export_public_key().decode(),
            root_disk=f"/dev/disk/by-id/wwn-{host.identity.disk.wwn}",
        )
        testiso.build_iso(artifacts.root / "node1.iso", testiso.kickstart_files(spec))
        url = f"http://127.0.0.1:{artifacts.server.server_address[1]}/node1.iso"
        root = sushy.Sushy(**lab.sushy_args(BMC), username="root", password="calvin", verify=lab.ca_path)
        system = root.get_system(root.get_system_collection().members_identities[0])
        (cd,) = (v for v in system.virtual_media.get_members() if sushy.VirtualMediaType.CD in v.media_types)
        cd.insert_media(url)
        system.set_system_boot_options(target=sushy.BootSource.CD, enabled=sushy.BootSourceOverrideEnabled.ONCE)
        system.reset_system(sushy.ResetType.ON)
        assert host.wait_for(lambda h: len(h.log.installs) == 1 and h.phase == "off", WAIT), host.snapshot()
        system.refresh()
        assert system.power_state == sushy.PowerState.OFF  # the kickstart's poweroff reached the BMC
        system.reset_system(sushy.ResetType.ON)
        assert host.wait_for(lambda h: h.phase == "os-up", WAIT), host.snapshot()
        assert host.unreachable is None
        lab.extra_control = fleet.control  # as the emulator's command line wires it
        yield Installed(host, host_key, tmp / "id", tmp, status_lines(tmp / "rf", lab.port))


def inventory(installed: Installed, pinned: asyncssh.SSHKey) -> Path:
    ident = installed.host.identity
    known = installed.tmp / "known_hosts"
    known.write_text(f"[{ident.address}]:{ident.port} {pinned.export_public_key().decode()}")
    args = f"-o UserKnownHostsFile={known} -o GlobalKnownHostsFile=/dev/null -o IdentitiesOnly=yes"
    node: dict[str, Any] = {
        "ansible_connection": "ssh",
        "ansible_host": ident.address,
        "ansible_port": ident.port,
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(installed.client_key),
        "ansible_ssh_common_args": args,
        "ansible_python_interpreter": "auto_silent",
    }
    path = installed.tmp / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"node1": node}}}))
    return path


PLAY = [
    {
        "name": "a lab host",
        "hosts": "node1",
        "gather_facts": True,
        "tasks": [
            {"name": "ping", "ansible.builtin.ping": {}},
            {"name": "marker", "ansible.builtin.command": "cat /etc/metalplane/provisioned", "changed_when": False},
            {
                "name": "copy",
                "ansible.builtin.copy": {
                    "content": "hello from the controller\n",
                    "dest": "/root/hello.txt",
                    "mode": "0600",
                },
            },
            {"name": "stat", "ansible.builtin.stat": {"path": "/root/hello.txt"}},
            {"name": "slurp", "ansible.builtin.slurp": {"src": "/root/hello.txt"}},
            {"name": "dir", "ansible.builtin.file": {"path": "/opt/lab", "state": "directory", "mode": "0755"}},
            {"name": "shell", "ansible.builtin.shell": "echo $HOME $(id -un)", "changed_when": False},
            {"name": "modprobe", "ansible.builtin.command": "modprobe br_netfilter"},
            {"name": "become", "ansible.builtin.command": "id -u", "become": True, "changed_when": False},
        ],
    }
]


def test_ansible_runs_ordinary_modules_over_ssh(
    installed: Installed, playbook: Callable[..., Any], ansible_tmp: Path
) -> None:
    env = {**ENV, "TMPDIR": str(ansible_tmp), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(ansible_tmp / "cp")}
    run = playbook(PLAY, inventory=inventory(installed, installed.host_key), env=env)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
    facts = run.task("Gathering Facts", "node1")["ansible_facts"]
    assert facts["ansible_hostname"] == "node1"
    assert facts["ansible_product_name"] == "PowerEdge R730"  # the host's DMI, not the controller's
    assert run.task("marker", "node1")["stdout"] == "lab-build-1"
    assert run.task("copy", "node1")["changed"] is True
    assert run.task("stat", "node1")["stat"]["mode"] == "0600"
    assert base64.b64decode(run.task("slurp", "node1")["content"]) == b"hello from the controller\n"
    assert run.task("shell", "node1")["stdout"] == "/root root"
    assert run.task("become", "node1")["stdout"] == "0"
    host = installed.host
    assert host.disk.read("/root/hello.txt") == b"hello from the controller\n"  # on the host's disk
    assert ["modprobe", "br_netfilter"] in [call.argv for call in host.log.shim_calls]
    assert "br_netfilter" in host.modules
    assert "nouveau" in host.modules  # its GPUs, with nothing blacklisting nouveau (lab.metal.driver)


def test_a_host_with_another_key_than_the_pinned_one_is_refused(
    installed: Installed, playbook: Callable[..., Any], ansible_tmp: Path
) -> None:
    env = {**ENV, "TMPDIR": str(ansible_tmp), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(ansible_tmp / "cp")}
    other = asyncssh.generate_private_key("ssh-ed25519")
    ping = [{**PLAY[0], "gather_facts": False, "tasks": PLAY[0]["tasks"][:1]}]
    run = playbook(ping, inventory=inventory(installed, other), env=env)
    assert run.rc == 4  # UNREACHABLE
    assert "Host key verification failed" in run.stdout + run.stderr


def test_labctl_status_shows_power_boot_device_media_os_and_ssh_address(installed: Installed) -> None:
    ident = installed.host.identity
    line = installed.status[0].split()
    assert line[:2] == ["host", BMC]
    assert dict(zip(line[2:10:2], line[3:11:2], strict=True)) == {
        "power": "On",
        "boot": "Hdd",
        "os": "os-up",
        "ssh": f"{ident.address}:{ident.port}",
    }
    assert line[-2:] == ["media", installed.host.snapshot()["media"]]
    assert line[-2:][1].endswith("/node1.iso")
