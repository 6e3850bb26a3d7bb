"""The lab's kubeadm shim on a real simulated host: init from inside the host starts the host's Kubernetes API.

What the unit tests cannot show: the shim program inside the host's sandbox reaches the lab over the control
socket, ``modprobe``/``sysctl`` inside the host feed kubeadm's preflight, ``admin.conf`` appears inside the host,
the API answers on the host's own address, and powering the host off takes the API down with it.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

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

BMC = "gen-1"
WAIT = 60.0
CONFIG = "/etc/kubernetes/kubeadm-config.yaml"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MetalHost]:
    try:
        probe()
    except SandboxUnavailable as exc:
        pytest.skip(f"the host sandboxes cannot run here: {exc}")
    # The package database (lab.metal.packages) is another shim family's: kubeadm and kubelet are taken as installed.
    monkeypatch.setattr(kubeadm, "installed_version", lambda _host, name: "1.34.2-1.1")
    monkeypatch.setattr(kubeadm, "runtime_active", lambda _host: True)
    with (
        RedfishLab(bmcs=[BmcSpec(name=BMC, personality="generic")], delay_scale=0.0, state_dir=tmp_path / "rf") as lab,
        MetalFleet(lab.states, tmp_path / "rf", delay_scale=0.0) as fleet,
        ArtifactServer(root=tmp_path / "artifacts") as artifacts,
    ):
        node = fleet.host(BMC)
        spec = testiso.HostSpec(
            mac=node.identity.boot_mac,
            address=node.identity.address,
            gateway=node.identity.gateway,
            root_disk=f"/dev/disk/by-id/wwn-{node.identity.disk.wwn}",
        )
        testiso.build_iso(artifacts.root / "node.iso", testiso.kickstart_files(spec))
        root = sushy.Sushy(**lab.sushy_args(BMC), username="root", password="calvin", verify=lab.ca_path)
        system = root.get_system(root.get_system_collection().members_identities[0])
        (cd,) = (v for v in system.virtual_media.get_members() if sushy.VirtualMediaType.CD in v.media_types)
        cd.insert_media(f"http://127.0.0.1:{artifacts.server.server_address[1]}/node.iso")
        system.set_system_boot_options(target=sushy.BootSource.CD, enabled=sushy.BootSourceOverrideEnabled.ONCE)
        system.reset_system(sushy.ResetType.ON)
        assert node.wait_for(lambda h: len(h.log.installs) == 1 and h.phase == "off", WAIT), node.snapshot()
        system.reset_system(sushy.ResetType.ON)
        assert node.wait_for(lambda h: h.phase == "os-up", WAIT), node.snapshot()
        yield node
        kubeadm.drop_cluster(node.name)


def inside(host: MetalHost, script: str) -> subprocess.CompletedProcess[str]:
    """Run a shell script in the host's OS, as an SSH session would."""
    return subprocess.run(
        host.session_command(["/bin/sh", "-c", script]), capture_output=True, text=True, timeout=60, check=False
    )


def test_kubeadm_init_inside_the_host_serves_its_api_until_it_powers_off(host: MetalHost) -> None:
    port = free_port(host.address)
    config = [
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "InitConfiguration",
            "localAPIEndpoint": {"advertiseAddress": host.address, "bindPort": port},
            "skipPhases": ["addon/kube-proxy"],
        },
        {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration", "kubernetesVersion": "v1.34.2"},
    ]
    refused = inside(
        host,
        f"mkdir -p /etc/kubernetes && cat > {CONFIG} <<'EOF'\n{yaml.safe_dump_all(config)}EOF\n"
        f"kubeadm init --config {CONFIG}",
    )
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "bridge-nf-call-iptables does not exist" in refused.stderr  # br_netfilter not loaded yet

    done = inside(
        host,
        "modprobe br_netfilter && printf 'net.ipv4.ip_forward = 1\\n' > /etc/sysctl.d/99-k8s.conf"
        f" && sysctl --system >/dev/null && kubeadm init --config {CONFIG} && cat /etc/kubernetes/admin.conf",
    )
    assert done.returncode == 0, done.stderr
    admin = yaml.safe_load(done.stdout.split("initialized successfully!\n", 1)[1])
    cluster = admin["clusters"][0]["cluster"]
    assert cluster["server"] == f"https://{host.address}:{port}"
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    request = urllib.request.Request(
        f"{cluster['server']}/api/v1/nodes", headers={"Authorization": f"Bearer {admin['users'][0]['user']['token']}"}
    )
    with urllib.request.urlopen(request, timeout=5, context=context) as answer:
        nodes = json.loads(answer.read())["items"]
    assert [n["metadata"]["name"] for n in nodes] == [inside(host, "hostname").stdout.strip().lower()]

    assert inside(host, "poweroff").returncode == 0
    assert host.wait_for(lambda h: h.phase == "off", WAIT), host.snapshot()
    with pytest.raises(urllib.error.URLError, match="refused"):
        urllib.request.urlopen(request, timeout=5, context=context)
