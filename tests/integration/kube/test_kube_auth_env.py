"""kube_ready and gpu_ready reach the cluster through ``K8S_AUTH_KUBECONFIG`` / ``K8S_AUTH_CONTEXT``
and the ``context`` option, like kubernetes.core (AWX credentials set exactly those variables).

The kubeconfig has two contexts on the same cluster: ``wrong`` (a token the server rejects) is the
current context, ``right`` carries the real token. Only the context selection can make a task
pass, and a task that falls back to the current context must fail with 401 without leaking the
token. Runs on the emulator and on the real lane (the kubeconfig is derived from the target's).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

WRONG_TOKEN = "wrong-token-" + "x" * 20
GPU_NODES = "nvidia.com/gpu.present=true"


@pytest.fixture
def two_contexts(kube: Any, ansible_tmp: Path) -> Path:
    """A kubeconfig whose current context ``wrong`` is refused; context ``right`` works."""
    source = yaml.safe_load(Path(kube.kubeconfig).read_text(encoding="utf-8"))
    current = next(c["context"] for c in source["contexts"] if c["name"] == source["current-context"])
    cluster = next(c["cluster"] for c in source["clusters"] if c["name"] == current["cluster"])
    user = next(u["user"] for u in source["users"] if u["name"] == current["user"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": cluster}],
        "users": [{"name": "intruder", "user": {"token": WRONG_TOKEN}}, {"name": "operator", "user": user}],
        "contexts": [
            {"name": "wrong", "context": {"cluster": "lab", "user": "intruder", "namespace": "default"}},
            {"name": "right", "context": {"cluster": "lab", "user": "operator", "namespace": "default"}},
        ],
        "current-context": "wrong",
    }
    path = ansible_tmp / "two-contexts.kubeconfig"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        yaml.safe_dump(config, handle)
    return path


@pytest.fixture
def seeded(kube: Any, unique: str) -> str:
    """A ready Widget, and (on the emulator) one GPU node; the real lane's fake kubelet has GPU nodes."""
    kube.ensure_widget_kind()
    kube.widget(unique, "True")
    if kube.emulator is not None:
        kube.emulator.gpu.add_gpu_node(f"{unique}-gpu", gpus=2)
    return unique


def tasks(name: str, **connection: Any) -> list[dict[str, Any]]:
    """kube_ready on the Widget and gpu_ready (allocatable) without a ``kubeconfig`` option."""
    widget = {"api_version": "test.metalplane.io/v1", "kind": "Widget", "namespace": "default", "name": name}
    gpus = {"checks": ["allocatable"], "node_selector": GPU_NODES, "gpus_per_node": 1}
    kube = {**widget, "wait_timeout": 10, **connection}
    gpu = {**gpus, "wait_timeout": 10, **connection}
    return [
        {"name": "kube", "metalplane.inference.kube_ready": kube, "register": "kube", "ignore_errors": True},
        {"name": "gpu", "metalplane.inference.gpu_ready": gpu, "register": "gpu", "ignore_errors": True},
    ]


def env(ansible_tmp: Path, **variables: str) -> dict[str, str]:
    return {"TMPDIR": str(ansible_tmp), **variables}


def test_k8s_auth_kubeconfig_and_context_from_the_environment(
    seeded: str, two_contexts: Path, ansible_tmp: Path, playbook: Any
) -> None:
    run = playbook(
        tasks(seeded),
        env=env(ansible_tmp, K8S_AUTH_KUBECONFIG=str(two_contexts), K8S_AUTH_CONTEXT="right"),
    )
    kube, gpu = run.task("kube"), run.task("gpu")
    assert kube.get("failed") is not True, kube
    assert kube["ready"] is True
    assert kube["objects"][0]["name"] == seeded
    assert gpu.get("failed") is not True, gpu
    assert gpu["ready"] is True
    assert gpu["nodes"]


def test_current_context_is_used_without_k8s_auth_context(
    seeded: str, two_contexts: Path, ansible_tmp: Path, playbook: Any
) -> None:
    """The counter-proof: same kubeconfig, no context chosen -> the current (wrong) context, 401."""
    run = playbook(tasks(seeded), env=env(ansible_tmp, K8S_AUTH_KUBECONFIG=str(two_contexts)))
    for name in ("kube", "gpu"):
        result = run.task(name)
        assert result["failed"] is True, result
        assert "401" in result["msg"] or "Unauthorized" in result["msg"], result["msg"]
        assert WRONG_TOKEN not in run.stdout + run.stderr


def test_context_option_wins_over_k8s_auth_context(
    seeded: str, two_contexts: Path, ansible_tmp: Path, playbook: Any
) -> None:
    """Module options take precedence over the environment, as in kubernetes.core."""
    run = playbook(
        tasks(seeded, context="right"),
        env=env(ansible_tmp, K8S_AUTH_KUBECONFIG=str(two_contexts), K8S_AUTH_CONTEXT="wrong"),
    )
    for name in ("kube", "gpu"):
        result = run.task(name)
        assert result.get("failed") is not True, result
        assert result["ready"] is True
