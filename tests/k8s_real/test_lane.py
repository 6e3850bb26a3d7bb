"""The real kube-apiserver lane itself: what ``scripts/k8s-real/lane.py`` promises the other suites.

Runs only inside ``make test-k8s-real`` (marker ``real_k8s``; skipped unless ``MP_KUBE_TARGET=real``
and ``MP_REAL_KUBECONFIG`` point at a running lane). It checks the pieces the Kubernetes suites rely
on: a real v1.20.2 server behind verified TLS and a token, the fake kubelet's Ready GPU nodes, real
controllers + scheduler making a Deployment and a GPU DaemonSet ready, the custom-resource request
that crashed the unpatched build (reflect2 trap), namespace cascade, and that a second lane starts
and stops without leaving a process behind.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for
from k8s_real.control import LaneControl, LaneControlError
from k8s_real.kubehttp import MERGE_PATCH, KubeHttp, KubeHttpError, Target

pytestmark = [
    pytest.mark.real_k8s,
    pytest.mark.skipif(
        os.environ.get("MP_KUBE_TARGET") != "real" or not os.environ.get("MP_REAL_KUBECONFIG"),
        reason="needs the real kube-apiserver lane (make test-k8s-real)",
    ),
]

REPO_ROOT = Path(__file__).resolve().parents[2]
LANE = REPO_ROOT / "scripts" / "k8s-real" / "lane.py"
POLL = Backoff(initial=0.2, cap=1.0, factor=1.5, jitter=0.1)
# Real controllers on a shared 2-core machine: pods are scheduled and "run" within seconds, but
# leave a wide margin so a busy machine does not make the lane flaky.
WORKLOAD_TIMEOUT = 120.0
IMAGE = "registry.k8s.io/pause:3.2"


@pytest.fixture(scope="module")
def api() -> KubeHttp:
    return KubeHttp(Target.from_kubeconfig(os.environ["MP_REAL_KUBECONFIG"]))


@pytest.fixture
def namespace(api: KubeHttp) -> Iterator[str]:
    name = f"lane-{uuid.uuid4().hex[:8]}"
    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    try:
        api.request("DELETE", f"/api/v1/namespaces/{name}")
    except KubeHttpError as exc:
        if exc.status != 404:
            raise


def is_pid_alive(pid: int) -> bool:
    """The pid names a live (non-zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _condition(obj: dict[str, Any], kind: str) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond.get("status")
    return None


def test_server_is_real_v1_20_behind_verified_tls_and_token(api: KubeHttp) -> None:
    version = api.get("/version")
    assert version["gitVersion"] == "v1.20.2"
    assert api.get("/readyz", verbose="true")  # every readyz check passes (200)

    bad_token = KubeHttp(Target(server=api.target.server, token="not-the-token", ca_pem=api.target.ca_pem))
    with pytest.raises(KubeHttpError) as err:
        bad_token.get("/api/v1/namespaces")
    assert err.value.status == 401

    # Without the lane's CA the server certificate must not verify: TLS really is checked.
    no_ca = KubeHttp(Target(server=api.target.server, token=api.target.token, ca_pem=None))
    with pytest.raises(ssl.SSLCertVerificationError):
        no_ca.get("/version")


def test_fake_kubelet_nodes_are_ready_gpu_nodes_with_fresh_leases(api: KubeHttp) -> None:
    nodes = [n for n in api.get("/api/v1/nodes")["items"] if n["metadata"]["name"].startswith("gpu-node-")]
    assert len(nodes) >= 1
    for node in nodes:
        name = node["metadata"]["name"]
        assert _condition(node, "Ready") == "True", name
        assert node["metadata"]["labels"]["nvidia.com/gpu.present"] == "true"
        assert int(node["status"]["allocatable"]["nvidia.com/gpu"]) > 0
        # The node lifecycle controller removes its not-ready taint once the node is Ready.
        taints = {t["key"] for t in node.get("spec", {}).get("taints") or []}
        assert not taints & {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}, taints
        lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")
        renewed = datetime.strptime(lease["spec"]["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert (datetime.now(UTC) - renewed).total_seconds() < 40, lease["spec"]


def test_deployment_becomes_available_through_real_controllers(api: KubeHttp, namespace: str) -> None:
    labels = {"app": "web"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": IMAGE}]}},
        },
    }
    api.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment)

    def observe() -> Poll[dict[str, Any]]:
        status = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/web").get("status") or {}
        return Poll(status.get("availableReplicas") == 2 and status.get("readyReplicas") == 2, status)

    wait_for(observe, timeout=WORKLOAD_TIMEOUT, what="Deployment web available", backoff=POLL)
    # The real chain: Deployment -> ReplicaSet -> Pods, bound by the scheduler, run by the fake kubelet.
    assert len(api.get(f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]) == 1
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeName"].startswith("gpu-node-")
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["containerStatuses"][0]["ready"] is True


def test_gpu_daemonset_is_ready_on_every_gpu_node(api: KubeHttp, namespace: str) -> None:
    gpu_nodes = api.get("/api/v1/nodes", labelSelector="nvidia.com/gpu.present=true")["items"]
    labels = {"app": "device-plugin"}
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "device-plugin"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "containers": [{"name": "plugin", "image": IMAGE, "securityContext": {"privileged": True}}],
                },
            },
        },
    }
    api.request("POST", f"/apis/apps/v1/namespaces/{namespace}/daemonsets", daemonset)

    def observe() -> Poll[dict[str, Any]]:
        status = api.get(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/device-plugin").get("status") or {}
        desired = status.get("desiredNumberScheduled")
        return Poll(desired == len(gpu_nodes) and status.get("numberReady") == desired, status)

    wait_for(observe, timeout=WORKLOAD_TIMEOUT, what="DaemonSet device-plugin ready", backoff=POLL)


def test_custom_resource_round_trip_does_not_crash_the_apiserver(api: KubeHttp, namespace: str) -> None:
    """Unpatched reflect2 1.0.1 under Go >= 1.18 killed the apiserver on the first CR request."""
    group = f"lane{uuid.uuid4().hex[:6]}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }
    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}"
    api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    try:
        wait_for(
            lambda: Poll(_condition(api.get(crd_path), "Established") == "True", "pending"),
            timeout=30,
            what="CRD Established",
            backoff=POLL,
        )
        plural = f"/apis/{group}/v1/namespaces/{namespace}/widgets"

        def create() -> Poll[str]:
            # A new CRD reaches the handler chain shortly after Established: retry 404 only.
            try:
                api.request("POST", plural, {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}})
            except KubeHttpError as exc:
                if exc.status != 404:
                    raise
                return Poll(False, str(exc))
            return Poll(True, "created")

        wait_for(create, timeout=30, what="first Widget created", backoff=POLL)
        api.request("PATCH", f"{plural}/w", {"spec": {"size": 3}}, content_type=MERGE_PATCH)
        with pytest.raises(KubeHttpError) as err:
            api.request("PATCH", f"{plural}/w", {"spec": {"size": "big"}}, content_type=MERGE_PATCH)
        assert err.value.status == 422
        assert api.get(f"{plural}/w")["spec"] == {"size": 3}
        assert api.get("/readyz") is not None
    finally:
        api.request("DELETE", crd_path)


def test_namespace_delete_cascades_through_the_controller_manager(api: KubeHttp) -> None:
    name = f"lane-{uuid.uuid4().hex[:8]}"
    api.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    api.request("POST", f"/api/v1/namespaces/{name}/configmaps", {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "gpu-node-0", "containers": [{"name": "c", "image": IMAGE}]}}
    api.request("POST", f"/api/v1/namespaces/{name}/pods", pod)
    wait_for(
        lambda: Poll(api.get(f"/api/v1/namespaces/{name}/pods/p")["status"].get("phase") == "Running", "pending"),
        timeout=WORKLOAD_TIMEOUT,
        what="pod p running",
        backoff=POLL,
    )
    api.request("DELETE", f"/api/v1/namespaces/{name}")

    def gone() -> Poll[str]:
        try:
            phase = api.get(f"/api/v1/namespaces/{name}")["status"]["phase"]
        except KubeHttpError as exc:
            if exc.status == 404:
                return Poll(True, "gone")
            raise
        return Poll(False, phase)

    # The namespace controller deletes the content (the fake kubelet finishes the pod's graceful
    # deletion), then removes the namespace.
    wait_for(gone, timeout=WORKLOAD_TIMEOUT, what=f"namespace {name} deleted", backoff=POLL)


# --------------------------------------------------------------------------------------------
# lane-control: the fault injection the Kubernetes suites use on this lane


@pytest.fixture(scope="module")
def control() -> LaneControl:
    found = LaneControl.from_env()
    assert found is not None, "the lane exports MP_REAL_LANE_CONTROL (lane.py run) or records it in lane.json"
    return found


def _refused(server: str) -> bool:
    port = int(server.rsplit(":", 1)[1])
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_control_needs_the_kubeconfig_token(control: LaneControl) -> None:
    with pytest.raises(LaneControlError) as err:
        LaneControl(control.url, "not-the-token").status()
    assert err.value.status == 401
    with pytest.raises(LaneControlError) as err:
        LaneControl(control.url, "not-the-token").kubelet()  # forwarded calls too
    assert err.value.status == 401


def test_outage_stops_the_apiserver_and_restarts_it_with_its_data_and_certificates(
    api: KubeHttp, control: LaneControl, namespace: str
) -> None:
    keep = {"metadata": {"name": "keep"}, "data": {"k": "v"}}
    api.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", keep)
    before = control.status()["apiserver"]
    down = control.outage(1, wait=False)
    try:
        assert down["stopped_pid"] == before["pid"]
        assert not is_pid_alive(before["pid"])
        assert _refused(api.target.server)  # the front door refuses while the apiserver is away
        with pytest.raises(ConnectionRefusedError):
            api.get("/version")
    finally:
        after = control.wait_up()
    assert after["up"] is True, after
    assert after["last_error"] == ""
    assert after["pid"] != before["pid"]
    assert after["restarts"] == before["restarts"] + 1
    # Same etcd data, same certificates (the kubeconfig's CA still verifies), same token file.
    assert api.get(f"/api/v1/namespaces/{namespace}/configmaps/keep")["data"] == {"k": "v"}
    assert api.get("/version")["gitVersion"] == "v1.20.2"
    state = json.loads(Path(os.environ["MP_REAL_KUBECONFIG"]).with_name("lane.json").read_text())
    recorded = next(p for p in state["processes"] if p["name"] == "kube-apiserver")
    assert recorded["pid"] == after["pid"]  # `lane.py stop` stops the new process


def test_drop_ends_open_watches_and_leaves_the_apiserver_running(api: KubeHttp, control: LaneControl) -> None:
    pid = control.status()["apiserver"]["pid"]
    resource_version = api.get("/api/v1/namespaces")["metadata"]["resourceVersion"]
    ended = threading.Event()
    outcome: list[str] = []

    def follow() -> None:
        try:
            for event in api.watch("/api/v1/namespaces", resource_version, timeout_seconds=120):
                outcome.append(event.get("type", "?"))
            outcome.append("ended")
        except OSError as exc:
            outcome.append(f"broken: {exc.__class__.__name__}")
        ended.set()

    threading.Thread(target=follow, daemon=True).start()
    wait_for(
        lambda: Poll(control.status()["front_door"]["connections"] >= 1, "no connection yet"),
        timeout=30,
        what="the watch through the front door",
        backoff=POLL,
    )
    assert control.drop_watches() >= 1
    assert ended.wait(10), "the watch stream did not end when the front door dropped it"
    assert outcome[-1] == "ended" or outcome[-1].startswith("broken"), outcome
    assert control.status()["apiserver"]["pid"] == pid  # only the connections went
    assert api.get("/version")["gitVersion"] == "v1.20.2"


def test_request_record_is_the_tests_lists_and_watches(api: KubeHttp, control: LaneControl, namespace: str) -> None:
    mark = control.mark()
    api.get(f"/api/v1/namespaces/{namespace}/configmaps", labelSelector="probe=1")
    resource_version = api.get(f"/api/v1/namespaces/{namespace}/secrets")["metadata"]["resourceVersion"]
    list(api.watch(f"/api/v1/namespaces/{namespace}/secrets", resource_version, timeout_seconds=1))
    api.get(f"/api/v1/namespaces/{namespace}")  # a get is not recorded

    def recorded() -> Poll[list[Any]]:
        mine = [r for r in control.requests(since=mark) if namespace in r.path]
        return Poll(len(mine) >= 3, mine)

    mine = wait_for(recorded, timeout=20, what="the audit records", backoff=POLL)
    assert [(r.verb, r.path.rsplit("/", 1)[-1], r.status) for r in mine] == [
        ("list", "configmaps", 200), ("list", "secrets", 200), ("watch", "secrets", 200),
    ]  # fmt: skip
    assert "labelSelector=probe%3D1" in mine[0].query
    # The control plane's own requests (fake kubelet heartbeats, controllers) use another user.
    assert not [r for r in control.requests(since=mark) if "leases" in r.path or r.path.endswith("/nodes")]


def test_fake_kubelet_nodes_and_pod_rules_at_runtime(api: KubeHttp, control: LaneControl, namespace: str) -> None:
    node = f"{namespace}-n1"
    control.add_node(node, gpus=2, labels={"lane-test": namespace}, device_plugin=False)
    try:
        got = api.get(f"/api/v1/nodes/{node}")
        assert _condition(got, "Ready") == "True"
        assert "nvidia.com/gpu" not in got["status"]["allocatable"]  # the device plugin is not up
        assert got["metadata"]["labels"]["lane-test"] == namespace
        control.update_node(node, device_plugin=True)
        assert api.get(f"/api/v1/nodes/{node}")["status"]["allocatable"]["nvidia.com/gpu"] == "2"

        control.hold_pods(namespace, stuck_at="check", crash_loop=True)
        pod = {
            "metadata": {"name": "p"},
            "spec": {
                "nodeName": node,
                "initContainers": [{"name": "first", "image": IMAGE}, {"name": "check", "image": IMAGE},
                                   {"name": "last", "image": IMAGE}],
                "containers": [{"name": "main", "image": IMAGE}],
            },
        }  # fmt: skip
        api.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod)
        path = f"/api/v1/namespaces/{namespace}/pods/p"

        def held() -> Poll[dict[str, Any]]:
            status = api.get(path).get("status") or {}
            return Poll(bool(status.get("initContainerStatuses")), status)

        status = wait_for(held, timeout=WORKLOAD_TIMEOUT, what="pod p held", backoff=POLL)
        assert status["phase"] == "Pending"
        states = {c["name"]: c["state"] for c in status["initContainerStatuses"]}
        assert states["first"]["terminated"]["reason"] == "Completed"
        assert states["check"]["waiting"]["reason"] == "CrashLoopBackOff"
        assert states["last"]["waiting"]["reason"] == "PodInitializing"
        assert _condition(api.get(path), "Ready") == "False"

        control.release_pods(namespace)
        wait_for(
            lambda: Poll(_condition(api.get(path), "Ready") == "True", "held"),
            timeout=WORKLOAD_TIMEOUT,
            what="pod p ready",
            backoff=POLL,
        )
        assert api.get(path)["status"]["phase"] == "Running"
    finally:
        control.remove_node(node)
    with pytest.raises(KubeHttpError) as err:
        api.get(f"/api/v1/nodes/{node}")
    assert err.value.status == 404
    assert node not in control.kubelet()["nodes"]


def _lane(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(LANE), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _lane_module() -> Any:
    spec = importlib.util.spec_from_file_location("k8s_real_lane", LANE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of live (non-zombie) processes whose arguments contain ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(cmdline)
    return found


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_second_lane_starts_and_stops_without_leftovers(tmp_path: Path) -> None:
    state_dir = tmp_path / "lane"
    started = _lane("start", "--state-dir", str(state_dir), "--no-controllers", "--nodes", "1", "--gpus", "4")
    try:
        assert started.returncode == 0, started.stderr
        kubeconfig = Path(started.stdout.strip())
        assert kubeconfig.stat().st_mode & 0o777 == 0o600
        api = KubeHttp(Target.from_kubeconfig(kubeconfig))
        nodes = api.get("/api/v1/nodes")["items"]
        assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in nodes] == ["4"]

        recorded = json.loads((state_dir / "lane.json").read_text())
        pids = [p["pid"] for p in recorded["processes"]]
        names = [p["name"] for p in recorded["processes"]]
        assert names == ["etcd", "kube-apiserver", "fake-kubelet", "lane-control"]
        assert _lane("status", "--state-dir", str(state_dir)).returncode == 0
        assert len(_processes_mentioning(str(state_dir))) == 4  # etcd, apiserver, fake kubelet, lane-control
        # The kubeconfig goes through lane-control's front door, not to the apiserver's own port.
        assert api.target.server == f"https://127.0.0.1:{recorded['ports']['front']}"
        assert recorded["apiserver"] == f"https://127.0.0.1:{recorded['ports']['apiserver']}"
        # Starting again over a running lane is refused rather than orphaning it.
        again = _lane("start", "--state-dir", str(state_dir), "--no-controllers", "--nodes", "0")
        assert again.returncode == 1
        assert "already running" in again.stderr
    finally:
        stopped = _lane("stop", "--state-dir", str(state_dir))
    assert stopped.returncode == 0, stopped.stderr
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
    assert _processes_mentioning(str(state_dir)) == []
    for port in recorded["ports"].values():
        assert not _port_open(port), port
    assert _lane("status", "--state-dir", str(state_dir)).returncode == 3
    assert _lane("stop", "--state-dir", str(state_dir)).returncode == 0  # idempotent


def test_a_failed_start_stops_what_it_had_started(tmp_path: Path) -> None:
    """etcd starts, the "apiserver" dies at once: start fails, names the culprit and leaves nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real_bin = Path(os.environ.get("K8S_REAL_BIN") or _lane_module().DEFAULT_BIN)
    (bin_dir / "etcd").symlink_to(real_bin / "etcd")
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        script = bin_dir / name
        script.write_text("#!/bin/sh\necho 'refusing to serve' >&2\nexit 3\n")
        script.chmod(0o755)
    state_dir = tmp_path / "lane"
    failed = _lane("start", "--state-dir", str(state_dir), "--bin-dir", str(bin_dir), "--nodes", "0", timeout=120)
    assert failed.returncode == 1
    assert "kube-apiserver exited during start-up" in failed.stderr
    assert "refusing to serve" in failed.stderr
    assert not (state_dir / "lane.json").exists()
    etcd_log = state_dir / "logs" / "etcd.log"
    assert etcd_log.exists()  # etcd did run ...
    assert _processes_mentioning(str(state_dir)) == []  # ... and was stopped
