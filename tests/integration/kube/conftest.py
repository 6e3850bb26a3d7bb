"""Kubernetes integration target: the in-process emulator, or the real kube-apiserver lane.

``MP_KUBE_TARGET=real`` plus ``MP_REAL_KUBECONFIG`` (set by ``scripts/k8s-real/lane.py run``) point
the same tests at a real Kubernetes 1.20 control plane. Seeding goes through the emulator's
in-process API, or through the kubernetes client on the real server, behind one small
``KubeTarget`` interface; so do faults and the request record:

- ``kube.outage(s)``: the emulator refuses connections for ``s`` seconds; the real lane stops
  kube-apiserver for ``s`` seconds and starts it again (``MP_REAL_LANE_CONTROL``, lane-control).
- ``kube.drop_watches()``: the emulator ends its watch streams; the real lane's front door cuts
  every connection of the tests' kubeconfig.
- ``kube.requests()``: the emulator's request log; on the real lane the apiserver's audit log of
  the tests' list and watch requests since the test began.
- the ``gpu`` fixture (``gpu_helpers.GpuLab``): GPU nodes and the GPU Operator validator from the
  emulator's simulators, or from the real lane's fake kubelet (nodes added at runtime, validator
  pods held not ready) and the real DaemonSet controller.

``resource.k8s.io`` (absent from 1.20) is provided on the real lane by the conformance suite's CRD
stand-ins (``dra`` fixture). What still needs the emulator (5xx injection) is ``emulator_only``.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

REAL = os.environ.get("MP_KUBE_TARGET") == "real" and bool(os.environ.get("MP_REAL_KUBECONFIG"))

# A namespaced custom resource with a status subresource: what kube_ready waits on in practice
# (InferenceCluster, ...); apiextensions.k8s.io/v1 exists on 1.20 as on the emulator.
WIDGET_API = "test.metalplane.io/v1"
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.metalplane.io"},
    "spec": {
        "group": "test.metalplane.io",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "emulator_only: needs the Kubernetes emulator (faults, GPU simulators, resource.k8s.io)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not REAL:
        return
    skip = pytest.mark.skip(reason="emulator only (MP_KUBE_TARGET=real)")
    for item in items:
        if "emulator_only" in item.keywords:
            item.add_marker(skip)


class KubeTarget:
    """Seeding and assertions the tests need, the same on the emulator and on a real server."""

    def __init__(self, kubeconfig: str, emulator: Any = None, control: Any = None) -> None:
        self.kubeconfig = kubeconfig
        self.emulator = emulator
        self.control = control  # k8s_real.control.LaneControl on the real lane
        self._dynamic: Any = None
        self._since = control.mark() if control is not None else 0
        self._emulator_since = 0

    @property
    def real(self) -> bool:
        return self.emulator is None

    def pick(self, emulator: int, real: int) -> int:
        """A budget (a module's ``wait_timeout``, seconds) for each target: a real apiserver restarts in 10-40 s."""
        return real if self.real else emulator

    def _lane(self) -> Any:
        if self.control is None:
            pytest.skip("the real lane exports no MP_REAL_LANE_CONTROL (a lane started before lane-control?)")
        return self.control

    def outage(self, seconds: float) -> None:
        """The API goes away for ``seconds``. Emulator: connections refused, returns at once (the
        API comes back by itself). Real lane: kube-apiserver stopped and started again with the same
        flags, certificates and etcd data; returns once it answers again."""
        if self.emulator is not None:
            self.emulator.make_unavailable(seconds)
            return
        self._lane().outage(seconds, wait=True)

    def drop_watches(self) -> int:
        """Every open watch ends mid-stream."""
        if self.emulator is not None:
            return self.emulator.drop_watches()
        return self._lane().drop_watches()

    def mark(self) -> None:
        """Count requests from now on: what a test's own set-up read (a fixture settling pods) is not
        what the module under test sent."""
        if self.emulator is not None:
            self._emulator_since = len(self.emulator.requests)
        else:
            self._since = self._lane().mark()

    def requests(self, *, settle: bool = True) -> list[Any]:
        """The list and watch requests the API saw since this target was made (or ``mark``), as ``(verb, path, query)``
        records (the emulator's log also has every other request; helpers filter by verb).

        On the real lane the audit log gets a watch only when it has ended, a moment after its client
        went away; ``settle`` re-reads until the record stops growing, for counts after a playbook."""
        if self.emulator is not None:
            from kube_helpers import Seen

            return [Seen.from_emulator(r) for r in list(self.emulator.requests)[self._emulator_since :]]
        lane = self._lane()
        records = lane.requests(since=self._since)
        for _attempt in range(20 if settle else 0):
            time.sleep(0.5)
            again = lane.requests(since=self._since)
            if len(again) == len(records):
                break
            records = again
        return records

    @property
    def dynamic(self) -> Any:
        if self._dynamic is None:
            from kubernetes import config
            from kubernetes.dynamic import DynamicClient

            self._dynamic = DynamicClient(config.new_client_from_config(config_file=self.kubeconfig))
        return self._dynamic

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.emulator is not None:
            return self.emulator.apply(obj)
        resource = self.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        meta = obj["metadata"]
        return resource.server_side_apply(
            body=obj, name=meta["name"], namespace=meta.get("namespace"), field_manager="tests", force_conflicts=True
        ).to_dict()

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete an object if it exists (cleanup)."""
        if self.emulator is not None:
            self.emulator.delete(api_version, kind, name, namespace)
            return
        from kubernetes.dynamic.exceptions import NotFoundError

        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        with contextlib.suppress(NotFoundError):
            resource.delete(name=name, namespace=namespace)

    def set_status(self, api_version: str, kind: str, name: str, status: dict[str, Any], namespace: str) -> None:
        if self.emulator is not None:
            self.emulator.set_status(api_version, kind, name, status, namespace=namespace)
            return
        resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        path = resource.path(name=name, namespace=namespace) + "/status"
        self.dynamic.request("PATCH", path, body={"status": status}, content_type="application/merge-patch+json")

    def ensure_widget_kind(self) -> None:
        """Create the Widget CRD and wait until discovery serves it (about 0.5 s on a real server)."""
        self.apply(WIDGET_CRD)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self.emulator is not None:
                    self.emulator.list(WIDGET_API, "Widget", namespace="default")
                else:
                    self.dynamic.resources.invalidate_cache()
                    self.dynamic.resources.get(api_version=WIDGET_API, kind="Widget")
                return
            except Exception:
                time.sleep(0.1)
        raise AssertionError("the Widget CRD never reached discovery")

    def widget(self, name: str, ready: str | None, *, labels: dict[str, str] | None = None,
               reason: str = "Testing", message: str = "") -> None:  # fmt: skip
        self.apply(
            {
                "apiVersion": WIDGET_API,
                "kind": "Widget",
                "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
                "spec": {"size": 1},
            }
        )
        if ready is not None:
            self.widget_status(name, ready, reason=reason, message=message)

    def widget_status(self, name: str, ready: str, *, reason: str = "Testing", message: str = "") -> None:
        condition = {"type": "Ready", "status": ready, "reason": reason, "message": message,
                     "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
        self.set_status(WIDGET_API, "Widget", name, {"conditions": [condition]}, namespace="default")


@pytest.fixture
def kube() -> Iterator[KubeTarget]:
    """A Kubernetes API to run modules against: a fresh emulator per test, or the real lane."""
    if REAL:
        from k8s_real.control import LaneControl

        yield KubeTarget(os.environ["MP_REAL_KUBECONFIG"], control=LaneControl.from_env())
        return
    from lab.kube.server import KubeEmulator

    # A fresh emulator (new port) per test: no state, fault or discovery cache leaks between tests.
    with KubeEmulator(delay_scale=1.0, name="it") as api:
        yield KubeTarget(str(api.kubeconfig_path), api)


_STAND_INS: list[str] = []  # kubeconfigs of real servers the DRA stand-ins were installed on


def ensure_dra_api(kube: KubeTarget) -> None:
    """Make ``resource.k8s.io/v1`` ResourceSlice/DeviceClass servable: built into the emulator, CRD
    stand-ins on the real 1.20 lane (installed once per session; ``fieldSelector=spec.driver`` is
    then unsupported, as on any server < 1.30)."""
    if not kube.real or kube.kubeconfig in _STAND_INS:
        return
    from pathlib import Path

    from integration.kube_conformance.kubeconf_support import KubeTarget as ConformanceTarget
    from integration.kube_conformance.kubeconf_support import install_dra_stand_ins

    target = ConformanceTarget("real", Path(kube.kubeconfig))
    try:
        install_dra_stand_ins(target)
    finally:
        target.close()
    kube.dynamic.resources.invalidate_cache()
    _STAND_INS.append(kube.kubeconfig)


@pytest.fixture
def dra(kube: KubeTarget, unique: str) -> Iterator[Any]:
    """A DRA cluster written through the API (nodes + NVIDIA ResourceSlices), on either target."""
    from dra_helpers import DraCluster

    ensure_dra_api(kube)
    cluster = DraCluster(kube, unique)
    try:
        yield cluster
    finally:
        cluster.cleanup()


@pytest.fixture
def gpu(kube: KubeTarget, unique: str) -> Iterator[Any]:
    """GPU nodes and the GPU Operator validator on either target (``gpu_helpers.GpuLab``)."""
    from gpu_helpers import GpuLab

    lab = GpuLab(kube, unique)
    try:
        yield lab
    finally:
        lab.cleanup()


@pytest.fixture
def unique() -> str:
    return "t" + uuid.uuid4().hex[:8]
