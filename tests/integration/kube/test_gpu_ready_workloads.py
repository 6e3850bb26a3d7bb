"""gpu_ready on a DaemonSet that real controllers make ready: runs on the emulator and on the real
kube-apiserver lane (whose fake kubelet registers GPU nodes and runs bound pods)."""

from __future__ import annotations

from typing import Any

GPU_NODES = "nvidia.com/gpu.present=true"


def validator_daemonset(namespace: str) -> dict[str, Any]:
    labels = {"app": "nvidia-operator-validator"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-operator-validator", "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "containers": [{"name": "nvidia-operator-validator", "image": "registry.k8s.io/pause:3.9"}],
                },
            },
        },
    }


def test_validator_daemonset_made_ready_by_the_controllers(kube: Any, unique: str, playbook: Any) -> None:
    if kube.emulator is not None:
        for name in ("g1", "g2"):
            kube.emulator.gpu.add_gpu_node(name, gpus=2)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": unique}})
    kube.apply(validator_daemonset(unique))
    args = {
        "kubeconfig": kube.kubeconfig,
        "node_selector": GPU_NODES,
        "validator_namespace": unique,
        "wait_timeout": 60,
    }
    result = playbook([{"name": "gpu", "metalplane.inference.gpu_ready": args, "ignore_errors": True}]).task("gpu")
    assert result.get("failed") is not True, result
    assert result["ready"] is True
    operator = result["checks"]["operator"]
    assert operator["desired"] == len(result["nodes"]) > 0
    assert all(node["allocatable"] >= 1 and node["source"] == "labels" for node in result["nodes"].values())
