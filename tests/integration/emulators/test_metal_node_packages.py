"""node_packages and ansible.builtin.systemd_service over real SSH on a simulated host (lab.metal.packages shims).

The same path the node roles take: a playbook on the installed host adds the Kubernetes repository of a minor
(a mirror on the lab's artifact server, as ``kubeadm_node_package_repository`` points at one), installs pinned
packages, runs again without a change, fails naming the versions found for a patch release that does not exist,
and enables and starts a unit with Ansible's own systemd module against the systemctl shim.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest
import sushy
import yaml

from lab.common.artifacts import ArtifactServer
from lab.metal import testiso
from lab.metal.fleet import MetalFleet
from lab.metal.host import MetalHost
from lab.metal.packages import installed, service_active
from lab.metal.sandbox import SandboxUnavailable, probe
from lab.redfish.server import BmcSpec, RedfishLab

# The site.yml run of test_baremetal_site.py runs this role on a simulated host in `make test`; this lane, with
# its own checks (idempotence of the role alone, refusals), runs in `make test-metal`.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("METALPLANE_METAL_FULL") != "1", reason="opt-in: METALPLANE_METAL_FULL=1 (make test-metal)"
    ),
]

BMC = "pkg-1"
WAIT = 60.0
KEY = b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGMHoXcBEADlabkey\n-----END PGP PUBLIC KEY BLOCK-----\n"
MIRROR = "core:/stable:/v1.34/deb"  # the upstream layout under the mirror's base URL


def _os_up(tmp: Path) -> Iterator[tuple[MetalHost, Path, str, str]]:
    """An installed host answering SSH, its client key, its known_hosts line, and the mirror's base URL."""
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
        testiso.build_iso(artifacts.root / "node.iso", testiso.kickstart_files(spec))
        (artifacts.root / MIRROR).mkdir(parents=True)
        (artifacts.root / MIRROR / "Release.key").write_bytes(KEY)
        root = sushy.Sushy(**lab.sushy_args(BMC), username="root", password="calvin", verify=lab.ca_path)
        system = root.get_system(root.get_system_collection().members_identities[0])
        (cd,) = (v for v in system.virtual_media.get_members() if sushy.VirtualMediaType.CD in v.media_types)
        cd.insert_media(f"{artifacts.base_url}/node.iso")
        system.set_system_boot_options(target=sushy.BootSource.CD, enabled=sushy.BootSourceOverrideEnabled.ONCE)
        system.reset_system(sushy.ResetType.ON)
        assert host.wait_for(lambda h: len(h.log.installs) == 1 and h.phase == "off", WAIT), host.snapshot()
        system.reset_system(sushy.ResetType.ON)
        assert host.wait_for(lambda h: h.phase == "os-up", WAIT), host.snapshot()
        ident = host.identity
        known = f"[{ident.address}]:{ident.port} {host_key.export_public_key().decode()}"
        yield host, tmp / "id", known, artifacts.base_url


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MetalHost, Path]]:
    try:
        probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"the host sandboxes cannot run here: {exc}")
    tmp = tmp_path_factory.mktemp("metal-packages")
    for host, key, known, base_url in _os_up(tmp):
        (tmp / "known_hosts").write_text(known)
        ident = host.identity
        inventory = {
            "ansible_connection": "ssh",
            "ansible_host": ident.address,
            "ansible_port": ident.port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(key),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={tmp / 'known_hosts'} -o GlobalKnownHostsFile=/dev/null",
            "ansible_python_interpreter": "auto_silent",
            "mirror": f"{base_url}/{MIRROR}/",
        }
        (tmp / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": {"node1": inventory}}}))
        yield host, tmp / "inventory.yml"


PACKAGES = {
    "packages": ["kubelet=1.34.2", "kubeadm=1.34.2", "containerd"],
    "repositories": [{"name": "kubernetes", "url": "{{ mirror }}", "key_url": "{{ mirror }}Release.key"}],
}
UNIT = "[Unit]\nDescription=lab demo\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
PLAY = [
    {
        "name": "node software",
        "hosts": "node1",
        "gather_facts": False,
        "tasks": [
            {"name": "install", "metalplane.inference.node_packages": PACKAGES},
            {"name": "again", "metalplane.inference.node_packages": PACKAGES},
            {
                "name": "missing",
                "metalplane.inference.node_packages": {**PACKAGES, "packages": ["kubelet=1.34.9"]},
                "ignore_errors": True,
            },
            {
                "name": "unit file",
                "ansible.builtin.copy": {"content": UNIT, "dest": "/etc/systemd/system/demo.service"},
            },
            {
                "name": "service",
                "ansible.builtin.systemd_service": {
                    "name": "demo",
                    "enabled": True,
                    "state": "started",
                    "daemon_reload": True,
                },
            },
            {"name": "service again", "ansible.builtin.systemd_service": {"name": "demo", "state": "started"}},
        ],
    }
]


def test_node_packages_and_systemd_service_over_ssh(
    node: tuple[MetalHost, Path], playbook: Callable[..., Any], ansible_tmp: Path
) -> None:
    host, inventory = node
    host.disk.write("/etc/systemd/system/demo.service", UNIT.encode())  # as a role's template task would
    env = {
        "ANSIBLE_PIPELINING": "true",
        "TMPDIR": str(ansible_tmp),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(ansible_tmp / "cp"),
    }
    run = playbook(PLAY, inventory=inventory, env=env)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
    first = run.task("install", "node1")
    assert first["changed"] is True
    assert first["installed"] == {"kubelet": "1.34.2-1.1", "kubeadm": "1.34.2-1.1", "containerd": "1.6.20~ds1-1+b1"}
    assert first["cache_updated"] is True
    assert run.task("again", "node1")["changed"] is False
    missing = run.task("missing", "node1")
    assert missing["failed"] is True
    assert (
        "kubelet=1.34.9: no repository offers it; versions found: 1.34.0-1.1, 1.34.1-1.1, 1.34.2-1.1"
        in (missing["msg"])
    )
    assert run.task("service", "node1")["changed"] is True
    assert run.task("service again", "node1")["changed"] is False
    assert host.disk.read("/etc/apt/keyrings/kubernetes.asc") == KEY
    assert installed(host, "kubeadm") == "1.34.2-1.1"
    assert service_active(host, "demo")
    assert service_active(host, "containerd")  # the deb's postinst enabled and started it
    assert ["apt-get", "update", "-q"] in [call.argv for call in host.log.shim_calls]
