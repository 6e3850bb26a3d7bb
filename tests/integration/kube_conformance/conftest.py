"""The Kubernetes conformance suite's target: the lab emulator, or a real kube-apiserver.

Why: the emulator is only worth trusting while it answers like a real server. The same tests run
against ``lab.kube.server.KubeEmulator`` (default) and, with ``MP_KUBE_TARGET=real`` and
``MP_REAL_KUBECONFIG=<path>``, against the real kube-apiserver lane (v1.20 built from Debian, see
docs/testing/k8s-real.md). Tests that need what 1.20 lacks (``resource.k8s.io``) or that inject
faults are marked ``emulator_only``; the real lane deselects them with ``-m "not emulator_only"``
(and they are skipped there even without ``-m``).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubeconf_support import GPU_NODES, GPUS_PER_NODE, KubeTarget, target_kind


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "emulator_only: needs the lab emulator (fault injection, simulators, resource.k8s.io/v1)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if target_kind() != "real":
        return
    skip = pytest.mark.skip(reason="emulator_only: not applicable to the real kube-apiserver lane")
    for item in items:
        if "emulator_only" in item.keywords and "kube_conformance" in str(item.fspath):
            item.add_marker(skip)


def start_emulator(**kwargs: Any) -> Any:
    from lab.kube.server import KubeEmulator

    emulator = KubeEmulator(**{"delay_scale": 0.0, "name": "conformance", **kwargs})
    emulator.start()
    for node in GPU_NODES:
        emulator.gpu.add_gpu_node(node, gpus=GPUS_PER_NODE, product="Tesla-V100-PCIE-32GB")
    return emulator


@pytest.fixture(scope="session")
def kube_target() -> Iterator[KubeTarget]:
    """The session's Kubernetes target (one emulator for the session, or the real lane)."""
    if target_kind() == "real":
        path = os.environ.get("MP_REAL_KUBECONFIG")
        if not path or not Path(path).is_file():
            pytest.fail("MP_KUBE_TARGET=real needs MP_REAL_KUBECONFIG=<kubeconfig of the real lane>")
        target = KubeTarget("real", Path(path))
        yield target
        target.close()
        return
    emulator = start_emulator()
    target = KubeTarget("emulator", emulator.kubeconfig_path, emulator)
    try:
        yield target
    finally:
        target.close()
        emulator.stop()


@pytest.fixture
def private_emulator() -> Iterator[Any]:
    """A separate emulator for one test (fault injection must not leak into other tests)."""
    emulator = start_emulator()
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture
def ns(kube_target: KubeTarget, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (not awaited)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"kc-{base}-{uuid.uuid4().hex[:5]}"
    core = client.CoreV1Api(kube_target.api_client())
    core.create_namespace({"metadata": {"name": name}})
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
