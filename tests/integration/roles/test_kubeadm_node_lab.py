"""The kubeadm_node role end to end on a simulated host: present (twice: nothing changes), then absent.

The host is installed over Redfish as in test_metal_ansible.py and the role runs over real SSH: packages from the
artifact server's Kubernetes mirror through the lab's package and systemctl shims; Helm runs for real against the
host's API with the Cilium stand-in chart.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest
import sushy
import yaml

from lab.common.artifacts import ArtifactServer
from lab.common.emulator import free_port
from lab.metal import kubeadm, testiso
from lab.metal.fleet import MetalFleet
from lab.metal.host import MetalHost
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

REPO = Path(__file__).resolve().parents[3]
HELM = REPO / ".build" / "bin" / "helm"
CILIUM = REPO / "tests" / "lab" / "charts" / "cilium-standin"
BMC = "gen-1"
WAIT = 60.0
ENV = {"ANSIBLE_HOST_KEY_CHECKING": "true", "ANSIBLE_PIPELINING": "false"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MetalHost, Path]]:
    try:
        probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"the host sandboxes cannot run here: {exc}")
    if not HELM.is_file() and shutil.which("helm") is None:
        pytest.skip("helm is not installed (make venv)")
    tmp = tmp_path_factory.mktemp("kubeadm-node")
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
        ident = host.identity
        spec = testiso.HostSpec(
            mac=ident.boot_mac,
            address=ident.address,
            gateway=ident.gateway,
            authorized_key=client.export_public_key().decode().strip(),
            host_key=host_key.export_private_key().decode(),
            host_key_pub=host_key.export_public_key().decode(),
            root_disk=f"/dev/disk/by-id/wwn-{ident.disk.wwn}",
        )
        testiso.build_iso(artifacts.root / "node1.iso", testiso.kickstart_files(spec))
        root = sushy.Sushy(**lab.sushy_args(BMC), username="root", password="calvin", verify=lab.ca_path)
        system = root.get_system(root.get_system_collection().members_identities[0])
        (cd,) = (v for v in system.virtual_media.get_members() if sushy.VirtualMediaType.CD in v.media_types)
        cd.insert_media(f"http://127.0.0.1:{artifacts.server.server_address[1]}/node1.iso")
        system.set_system_boot_options(target=sushy.BootSource.CD, enabled=sushy.BootSourceOverrideEnabled.ONCE)
        system.reset_system(sushy.ResetType.ON)
        assert host.wait_for(lambda h: len(h.log.installs) == 1 and h.phase == "off", WAIT), host.snapshot()
        system.reset_system(sushy.ResetType.ON)
        assert host.wait_for(lambda h: h.phase == "os-up", WAIT), host.snapshot()
        known = tmp / "known_hosts"
        known.write_text(f"[{ident.address}]:{ident.port} {host_key.export_public_key().decode()}")
        node_vars: dict[str, Any] = {
            "ansible_connection": "ssh",
            "ansible_host": ident.address,
            "ansible_port": ident.port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(tmp / "id"),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={known} -o GlobalKnownHostsFile=/dev/null",
            "ansible_python_interpreter": "auto_silent",
            "kubeadm_node_kubernetes_version": "v1.34.2",
            "kubeadm_node_package_repository": artifacts.base_url,
            "kubeadm_node_api_port": free_port(ident.address),
            "kubeadm_node_cilium_chart_path": str(CILIUM),
            "kubeadm_node_helm_binary": str(HELM) if HELM.is_file() else "",
            "kubeadm_node_kubeconfig_dir": str(tmp / "kubeconfigs"),
            "kubeadm_node_lb_pool": ["127.77.0.200-127.77.0.210"],
            "kubeadm_node_gpu_model": "v100",
            "kubeadm_node_wait_timeout": 60,
        }
        (tmp / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": {"r730": node_vars}}}))
        yield host, tmp
        kubeadm.drop_cluster(host.name)


def play(state: str) -> list[dict[str, Any]]:
    return [
        {
            "name": f"kubeadm_node {state}",
            "hosts": "r730",
            "gather_facts": False,
            "roles": [{"role": "metalplane.inference.kubeadm_node", "kubeadm_node_state": state}],
        }
    ]


def test_role_up_again_and_down(node: tuple[MetalHost, Path], playbook: Callable[..., Any], ansible_tmp: Path) -> None:
    host, tmp = node
    env = {**ENV, "TMPDIR": str(ansible_tmp), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(ansible_tmp / "cp")}
    up = playbook(play("present"), inventory=tmp / "inventory.yml", env=env, timeout=900)
    assert up.rc == 0, up.stdout[-4000:] + up.stderr[-2000:]
    cluster = kubeadm.cluster_of(host.name)
    assert cluster is not None
    node_obj = cluster.api.get("v1", "Node", cluster.node_name)
    assert node_obj["metadata"]["labels"]["modelplane.ai/pool"] == "gpu"
    assert kubeadm.CONTROL_PLANE_LABEL not in {t["key"] for t in node_obj["spec"].get("taints") or []}
    pool = cluster.api.get("cilium.io/v2", "CiliumLoadBalancerIPPool", "r730")
    assert pool["spec"]["blocks"] == [{"start": "127.77.0.200", "stop": "127.77.0.210"}]
    modelplane = yaml.safe_load((tmp / "kubeconfigs" / "r730-modelplane.kubeconfig").read_text())
    assert cluster.api.authenticates(f"Bearer {modelplane['users'][0]['user']['token']}")
    assert (tmp / "kubeconfigs" / "r730.kubeconfig").stat().st_mode & 0o777 == 0o600

    again = playbook(play("present"), inventory=tmp / "inventory.yml", env=env, timeout=900)
    assert again.rc == 0, again.stdout[-4000:]
    assert again.changed("r730") == 0, _changed_tasks(again.stdout)

    down = playbook(play("absent"), inventory=tmp / "inventory.yml", env=env, timeout=900)
    assert down.rc == 0, down.stdout[-4000:] + down.stderr[-2000:]
    assert kubeadm.cluster_of(host.name) is None
    assert host.disk.read(kubeadm.ADMIN_CONF) is None
    assert not (tmp / "kubeconfigs" / "r730.kubeconfig").exists()


def _changed_tasks(stdout: str) -> list[str]:
    """The names of the tasks a json-callback run reports changed (the assertion's message)."""
    import json

    plays = json.loads(stdout).get("plays", [])
    return [
        t["task"]["name"]
        for play in plays
        for t in play.get("tasks", [])
        if any(h.get("changed") for h in t.get("hosts", {}).values())
    ]
