"""The lab's kubeadm shim: v1beta4 validation as kubeadm's strict decoder does, preflight, init/reset, the node."""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.common.emulator import free_port
from lab.kube.gpu import NFD_NVIDIA_LABEL, NVML_ANNOTATION
from lab.metal import kubeadm
from lab.metal.kubeadm_config import ConfigError, validate
from lab.metal.sandbox import Disk
from lab.metal.shims import HANDLERS

ADDRESS = "127.77.0.42"  # a loopback address of the lab network no other test binds
V100 = "Tesla V100-PCIE-16GB"


def config(
    *, version: str = "v1.34.2", init: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None
) -> str:
    """A configuration shaped like the role's template, with overrides."""
    documents = [
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "InitConfiguration",
            "localAPIEndpoint": {"advertiseAddress": ADDRESS, "bindPort": 6443},
            "nodeRegistration": {"name": "r730", "criSocket": "unix:///var/run/containerd/containerd.sock"},
            "skipPhases": ["addon/kube-proxy"],
            **(init or {}),
        },
        {
            "apiVersion": "kubeadm.k8s.io/v1beta4",
            "kind": "ClusterConfiguration",
            "kubernetesVersion": version,
            "networking": {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"},
            **(cluster or {}),
        },
        {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "cgroupDriver": "systemd"},
    ]
    return yaml.safe_dump_all(documents)


# (case, text, installed kubeadm version, None when valid or what the error says)
CONFIGS: list[tuple[str, str, str | None, str | None]] = [
    ("the role's shape", config(), "v1.34.2", None),
    ("kubeadm one minor newer", config(), "v1.35.0", None),
    ("no installed version known", config(), None, None),
    ("unknown top-level field", config(cluster={"podSubnet": "10.244.0.0/16"}), None, 'unknown field "podSubnet"'),
    (
        "unknown nested field",
        config(init={"nodeRegistration": {"labels": {"a": "b"}}}),
        None,
        'unknown field "nodeRegistration.labels"',
    ),
    (
        "v1beta3 field name",
        config(cluster={"apiServer": {"timeoutForControlPlane": "4m"}}),
        None,
        'unknown field "apiServer.timeoutForControlPlane"',
    ),
    ("old apiVersion", config().replace("kubeadm.k8s.io/v1beta4", "kubeadm.k8s.io/v1beta3"), None, "v1beta3"),
    ("unknown kind", config().replace("kind: InitConfiguration", "kind: InitConfig"), None, 'no kind "InitConfig"'),
    ("too old for v1beta4", config(version="v1.30.4"), None, ">= v1.31.0"),
    ("newer than kubeadm", config(version="v1.34.2"), "v1.33.5", "newer than kubeadm's own version"),
    ("two minors behind kubeadm", config(version="v1.32.1"), "v1.34.2", "v1.34 or v1.33 only"),
    ("not a version", config(version="stable"), None, "couldn't parse Kubernetes version"),
    ("no version", config(version=""), None, "kubernetesVersion is unset"),
    ("bad port", config(init={"localAPIEndpoint": {"bindPort": 70000}}), None, "bindPort"),
    ("no kubeadm document", yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap"}), None, 'no kind "ConfigMap"'),
]


@pytest.mark.parametrize(("case", "text", "installed", "error"), CONFIGS, ids=[c[0] for c in CONFIGS])
def test_config_validation(case: str, text: str, installed: str | None, error: str | None) -> None:
    if error is None:
        settings = validate(text, installed)
        assert settings.bind_port == 6443
        assert settings.kube_proxy is False  # skipPhases addon/kube-proxy
        assert settings.pod_subnet == "10.244.0.0/16"
        return
    with pytest.raises(ConfigError) as raised:
        validate(text, installed)
    assert error in str(raised.value), case


def test_other_kubeadm_kinds_are_ignored_with_a_warning() -> None:
    text = config() + "---\n" + yaml.safe_dump({"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ResetConfiguration"})
    assert "Kind=ResetConfiguration" in validate(text).warnings[0]


# ------------------------------------------------------------------------------ a host without a sandbox
@dataclass
class FakeHost:
    """What a ShimHost offers, on a temporary disk."""

    directory: Path
    name: str = "r730-1"
    modules: set[str] = field(default_factory=set)
    models: list[str] = field(default_factory=list)
    bind: str = ADDRESS

    def __post_init__(self) -> None:
        self.disk = Disk(self.directory / "disk")
        self.disk.ensure()

    @property
    def address(self) -> str:
        return self.bind

    @property
    def gpu_models(self) -> list[str]:
        return self.models


def run(host: FakeHost, *argv: str) -> Any:
    command = argv[0]
    return HANDLERS[command][1](list(argv), host)  # type: ignore[arg-type]


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHost]:
    versions = {"kubeadm": "1.34.2-1.1", "kubelet": "1.34.2-1.1"}
    monkeypatch.setattr(kubeadm, "installed_version", lambda _host, name: versions.get(name))
    monkeypatch.setattr(kubeadm, "runtime_active", lambda _host: True)
    fake = FakeHost(tmp_path)
    yield fake
    kubeadm.drop_cluster(fake.name)


def prepared(host: FakeHost, port: int, **overrides: Any) -> str:
    """The kernel state the role sets, and a config file on the host's disk; returns its path."""
    host.modules |= {"overlay", "br_netfilter"}
    host.disk.write("/etc/sysctl.d/99-kubernetes.conf", b"net.ipv4.ip_forward = 1\n")
    assert run(host, "sysctl", "--system").rc == 0
    text = config(init={"localAPIEndpoint": {"advertiseAddress": ADDRESS, "bindPort": port}}, **overrides)
    host.disk.write("/etc/kubernetes/kubeadm-config.yaml", text.encode())
    return "/etc/kubernetes/kubeadm-config.yaml"


def wait(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_sysctl_keeps_the_hosts_settings(host: FakeHost) -> None:
    assert run(host, "sysctl", "-n", "net.ipv4.ip_forward").stdout == "0\n"
    missing = run(host, "sysctl", "net.bridge.bridge-nf-call-iptables")
    assert missing.rc == 1
    assert "No such file" in missing.stderr
    host.modules.add("br_netfilter")
    assert run(host, "sysctl", "-w", "net.ipv4.ip_forward=1").rc == 0
    assert run(host, "sysctl", "net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables").stdout == (
        "net.ipv4.ip_forward = 1\nnet.bridge.bridge-nf-call-iptables = 1\n"
    )


# (case, what the host lacks, the preflight error)
PREFLIGHT: list[tuple[str, str, str]] = [
    ("br_netfilter not loaded", "module", "bridge-nf-call-iptables does not exist"),
    ("ip_forward off", "sysctl", "ip_forward contents are not set to 1"),
    ("containerd down", "runtime", "container runtime is not running"),
]


@pytest.mark.parametrize(("case", "lacks", "error"), PREFLIGHT, ids=[p[0] for p in PREFLIGHT])
def test_init_preflight(host: FakeHost, monkeypatch: pytest.MonkeyPatch, case: str, lacks: str, error: str) -> None:
    path = prepared(host, free_port(ADDRESS))
    if lacks == "module":
        host.modules.discard("br_netfilter")
    elif lacks == "sysctl":
        run(host, "sysctl", "-w", "net.ipv4.ip_forward=0")
    else:
        monkeypatch.setattr(kubeadm, "runtime_active", lambda _host: False)
    result = run(host, "kubeadm", "init", "--config", path)
    assert result.rc == 1, case
    assert error in result.stderr, case
    assert host.disk.read(kubeadm.ADMIN_CONF) is None
    assert kubeadm.cluster_of(host.name) is None


def test_init_refuses_an_invalid_config_before_writing(host: FakeHost) -> None:
    path = prepared(host, free_port(ADDRESS), cluster={"podCIDR": "10.244.0.0/16"})
    result = run(host, "kubeadm", "init", "--config", path)
    assert result.rc == 1
    assert 'unknown field "podCIDR"' in result.stderr
    assert host.disk.read(kubeadm.ADMIN_CONF) is None


def _client(kubeconfig: dict[str, Any]) -> tuple[str, str, ssl.SSLContext]:
    cluster = kubeconfig["clusters"][0]["cluster"]
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    return cluster["server"], kubeconfig["users"][0]["user"]["token"], context


def _get(kubeconfig: dict[str, Any], path: str) -> dict[str, Any]:
    server, token, context = _client(kubeconfig)
    request = urllib.request.Request(server + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=5, context=context) as answer:
        return json.loads(answer.read())


def test_init_starts_the_api_node_ready_with_cilium_gpus_with_the_driver_and_reset_removes_it(
    host: FakeHost,
) -> None:
    port = free_port(ADDRESS)
    path = prepared(host, port)
    host.models = [V100, V100]
    assert run(host, "kubeadm", "version", "-o", "short").stdout == "v1.34.2\n"

    result = run(host, "kubeadm", "init", "--config", path)
    assert result.rc == 0, result.stderr
    admin = yaml.safe_load(host.disk.read(kubeadm.ADMIN_CONF) or b"")
    assert admin["clusters"][0]["cluster"]["server"] == f"https://{ADDRESS}:{port}"
    node = _get(admin, "/api/v1/nodes/r730")  # over HTTPS, verified against the CA admin.conf carries
    assert node["metadata"]["labels"][kubeadm.CONTROL_PLANE_LABEL] == ""
    assert {t["key"] for t in node["spec"]["taints"]} == {kubeadm.CONTROL_PLANE_LABEL, "node.kubernetes.io/not-ready"}
    assert node["status"]["conditions"][0]["reason"] == "KubeletNotReady"
    assert node["spec"]["podCIDR"] == "10.244.0.0/24"
    assert NFD_NVIDIA_LABEL not in node["metadata"]["labels"]  # no driver loaded yet

    again = run(host, "kubeadm", "init", "--config", path)
    assert again.rc == 1
    assert "admin.conf already exists" in again.stderr

    cluster = kubeadm.cluster_of(host.name)
    assert cluster is not None
    api = cluster.api
    api.create(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "cilium", "namespace": "kube-system", "labels": {"k8s-app": "cilium"}},
            "spec": {
                "selector": {"matchLabels": {"k8s-app": "cilium"}},
                "template": {
                    "metadata": {"labels": {"k8s-app": "cilium"}},
                    "spec": {"tolerations": [{"operator": "Exists"}], "containers": [{"name": "a", "image": "x"}]},
                },
            },
        }
    )

    def ready() -> bool:
        current = api.get("v1", "Node", "r730") or {}
        return current.get("status", {}).get("conditions", [{}])[0].get("status") == "True"

    assert wait(ready)
    assert host.disk.read(kubeadm.CNI_CONF) is not None
    ds_ready = wait(
        lambda: (
            (api.get("apps/v1", "DaemonSet", "cilium", "kube-system") or {}).get("status", {}).get("numberReady") == 1
        )
    )
    assert ds_ready

    host.modules.add("nvidia")
    assert wait(lambda: NFD_NVIDIA_LABEL in ((api.get("v1", "Node", "r730") or {})["metadata"].get("labels") or {}))
    annotation = json.loads(api.get("v1", "Node", "r730")["metadata"]["annotations"][NVML_ANNOTATION])
    assert annotation == [{"name": V100, "memory_mib": 16384}] * 2
    host.modules.discard("nvidia")
    assert wait(lambda: NFD_NVIDIA_LABEL not in (api.get("v1", "Node", "r730")["metadata"].get("labels") or {}))

    refused = run(host, "kubeadm", "reset")
    assert refused.rc == 1
    assert kubeadm.cluster_of(host.name) is not None
    reset = run(host, "kubeadm", "reset", "-f")
    assert reset.rc == 0
    assert "/etc/cni/net.d" in reset.stdout
    assert kubeadm.cluster_of(host.name) is None
    assert host.disk.read(kubeadm.ADMIN_CONF) is None
    with pytest.raises(urllib.error.URLError, match="refused"):
        _get(admin, "/api/v1/nodes")


def test_service_account_token_authenticates_and_the_host_going_down_suspends_the_api(host: FakeHost) -> None:
    port = free_port(ADDRESS)
    assert run(host, "kubeadm", "init", "--config", prepared(host, port)).rc == 0
    cluster = kubeadm.cluster_of(host.name)
    assert cluster is not None
    api = cluster.api
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "mp", "namespace": "kube-system"}})
    api.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                "name": "mp-token",
                "namespace": "kube-system",
                "annotations": {"kubernetes.io/service-account.name": "mp"},
            },
        }
    )
    assert wait(
        lambda: bool(((api.get("v1", "Secret", "mp-token", "kube-system") or {}).get("data") or {}).get("token"))
    )
    secret = api.get("v1", "Secret", "mp-token", "kube-system")
    admin = yaml.safe_load(host.disk.read(kubeadm.ADMIN_CONF) or b"")
    admin["users"][0]["user"]["token"] = base64.b64decode(secret["data"]["token"]).decode()
    assert _get(admin, "/api/v1/nodes")["items"][0]["metadata"]["name"] == "r730"

    admin["users"][0]["user"]["token"] = "not-a-token"
    with pytest.raises(urllib.error.HTTPError) as denied:
        _get(admin, "/api/v1/nodes")
    assert denied.value.code == 401

    kubeadm.host_event(host, "halt")  # type: ignore[arg-type]
    with pytest.raises(urllib.error.URLError, match="refused"):
        _get(admin, "/api/v1/nodes")
    kubeadm.host_event(host, "boot")  # type: ignore[arg-type]
    admin["users"][0]["user"]["token"] = api.token
    assert _get(admin, "/api/v1/nodes")["items"]
    host.disk.wipe()  # reinstalled: the next boot finds no admin.conf
    kubeadm.host_event(host, "boot")  # type: ignore[arg-type]
    assert kubeadm.cluster_of(host.name) is None


def test_kubeadm_not_installed_is_command_not_found(host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubeadm, "installed_version", lambda _host, _name: None)
    assert run(host, "kubeadm", "version", "-o", "short").rc == 127
