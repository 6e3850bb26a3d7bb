"""The ``nvidia_driver`` role on a simulated R730 over SSH: the stand-in .run, nouveau, DKMS, nvidia-smi.

One installed lab host (two V100s behind its BMC, nouveau loaded at boot), then real ``ansible-playbook`` runs of
the role: a wrong checksum fails before anything reaches the node; the first run blacklists nouveau, reboots once,
installs through the stand-in installer (dkms, modprobe) and verifies the GPUs against the BMC's; the second run
changes nothing. The prerequisites come from the lab's package shims (``node_packages``); nvidia-persistenced runs
under the systemctl shim.
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
from lab.metal import driver, testiso
from lab.metal.fleet import MetalFleet
from lab.metal.host import MetalHost
from lab.metal.sandbox import SandboxUnavailable, probe
from lab.redfish.bmc import GPU_MODEL
from lab.redfish.server import BmcSpec, RedfishLab

# The site.yml run of test_baremetal_site.py runs this role on a simulated host in `make test`; this lane, with
# its own checks (idempotence of the role alone, refusals), runs in `make test-metal`.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("METALPLANE_METAL_FULL") != "1", reason="opt-in: METALPLANE_METAL_FULL=1 (make test-metal)"
    ),
]

BMC = "drv-1"
WAIT = 60.0
ENV = {"ANSIBLE_HOST_KEY_CHECKING": "true", "ANSIBLE_PIPELINING": "false"}
REPO = Path(__file__).resolve().parents[3]
PUBLISH = "metalplane.inference.nvidia_driver : Publish nvidia_driver_facts"


@pytest.fixture(scope="module")
def lab_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MetalHost, Path, dict[str, str]]]:
    try:
        probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"the host sandboxes cannot run here: {exc}")
    tmp = tmp_path_factory.mktemp("metal-driver")
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
        url = f"{artifacts.base_url}/node.iso"
        root = sushy.Sushy(**lab.sushy_args(BMC), username="root", password="calvin", verify=lab.ca_path)
        system = root.get_system(root.get_system_collection().members_identities[0])
        (cd,) = (v for v in system.virtual_media.get_members() if sushy.VirtualMediaType.CD in v.media_types)
        cd.insert_media(url)
        system.set_system_boot_options(target=sushy.BootSource.CD, enabled=sushy.BootSourceOverrideEnabled.ONCE)
        system.reset_system(sushy.ResetType.ON)
        assert host.wait_for(lambda h: len(h.log.installs) == 1 and h.phase == "off", WAIT), host.snapshot()
        system.reset_system(sushy.ResetType.ON)
        assert host.wait_for(lambda h: h.phase == "os-up", WAIT), host.snapshot()
        known = tmp / "known_hosts"
        ident = host.identity
        known.write_text(f"[{ident.address}]:{ident.port} {host_key.export_public_key().decode()}")
        args = f"-o UserKnownHostsFile={known} -o GlobalKnownHostsFile=/dev/null -o IdentitiesOnly=yes"
        node = {
            "ansible_connection": "ssh",
            "ansible_host": ident.address,
            "ansible_port": ident.port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(tmp / "id"),
            "ansible_ssh_common_args": args,
            "ansible_python_interpreter": "auto_silent",
        }
        inventory = tmp / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node1": node}}}))
        published = {
            "url": f"{artifacts.base_url}/{artifacts.nvidia_driver['path']}",
            "sha256": artifacts.nvidia_driver["sha256"],
        }
        yield host, inventory, published


def _play(url: str, sha256: str, tmp: Path) -> list[dict[str, Any]]:
    return [
        {
            "name": "driver",
            "hosts": "node1",
            "gather_facts": False,
            "roles": [
                {
                    "role": "metalplane.inference.nvidia_driver",
                    "vars": {
                        "nvidia_driver_installer_url": url,
                        "nvidia_driver_installer_sha256": sha256,
                        "nvidia_driver_expected_gpus": [{"model": GPU_MODEL, "count": 2}],
                        "nvidia_driver_cache_dir": str(tmp / "cache"),
                        "nvidia_driver_install_prerequisites": True,
                        "nvidia_driver_persistence": True,
                        "nvidia_driver_reboot_timeout": 120,
                    },
                }
            ],
        }
    ]


def test_nvidia_driver_role_on_a_lab_host(
    lab_host: tuple[MetalHost, Path, dict[str, str]], playbook: Callable[..., Any], ansible_tmp: Path
) -> None:
    host, inventory, published = lab_host
    env = {**ENV, "TMPDIR": str(ansible_tmp), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(ansible_tmp / "cp")}
    assert "nouveau" in host.modules  # a fresh host: nothing blacklists it

    wrong = playbook(_play(published["url"], "0" * 64, ansible_tmp), inventory=inventory, env=env)
    assert wrong.rc == 2
    assert "checksum" in (wrong.stdout + wrong.stderr).lower()
    assert host.disk.read(f"/var/cache/metalplane/nvidia/{driver.installer_name()}") is None  # nothing copied

    first = playbook(_play(published["url"], published["sha256"], ansible_tmp), inventory=inventory, env=env)
    assert first.rc == 0, first.stdout[-4000:] + first.stderr[-2000:]
    calls = [c.argv for c in host.log.shim_calls]
    assert any(argv[:2] == ["update-initramfs", "-u"] for argv in calls)
    assert len(host.log.boots) == 3  # installer, first boot, the one reboot that unloads nouveau
    assert ["dkms", "build", "-m", "nvidia", "-v", driver.DRIVER_VERSION, "-k", driver.running_kernel()] in calls
    assert "nvidia" in host.modules
    assert "nouveau" not in host.modules
    facts = first.task(PUBLISH, "node1")["ansible_facts"]["nvidia_driver_facts"]
    assert facts["version"] == driver.DRIVER_VERSION
    assert facts["kernel_module_type"] == "proprietary"  # auto, resolved for Volta
    assert facts["changed_by"] == "install"
    assert [(g["name"], g["memory_total_mib"]) for g in facts["gpus"]] == [(GPU_MODEL, 16384)] * 2

    again = playbook(_play(published["url"], published["sha256"], ansible_tmp), inventory=inventory, env=env)
    assert again.rc == 0, again.stdout[-4000:]
    assert again.changed("node1") == 0
    assert again.task(PUBLISH, "node1")["ansible_facts"]["nvidia_driver_facts"]["changed_by"] is None
    assert len(host.log.boots) == 3
