"""Helpers of the Kubernetes conformance suite (importable by its tests and by other suites).

Why: the same tests run against the lab emulator and the real kube-apiserver lane, so every wait
is an ``eventually`` (real controllers take time) and resource.k8s.io can be provided by CRD
stand-ins on servers that lack it.
"""

from __future__ import annotations

import copy
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")

# Seeded on the emulator to mirror the real lane's fake kubelet (K8S_REAL_NODES=2, K8S_REAL_GPUS=8).
GPU_NODES = ("gpu-node-0", "gpu-node-1")
GPUS_PER_NODE = 8
HELD = "example.com/hold"  # a finalizer no controller removes: tests remove it themselves


def target_kind() -> str:
    return "real" if os.environ.get("MP_KUBE_TARGET") == "real" else "emulator"


@dataclass
class KubeTarget:
    """What a conformance test talks to. ``emulator`` is None on the real lane."""

    kind: str
    kubeconfig: Path
    emulator: Any = None
    gpu_nodes: tuple[str, ...] = GPU_NODES
    _clients: list[Any] = field(default_factory=list)

    @property
    def real(self) -> bool:
        return self.kind == "real"

    def api_client(self) -> Any:
        from kubernetes import config

        client = config.new_client_from_config(str(self.kubeconfig))
        self._clients.append(client)
        return client

    def dynamic(self) -> Any:
        """A fresh DynamicClient (its discovery cache starts empty)."""
        from kubernetes import dynamic

        return dynamic.DynamicClient(self.api_client())

    def raw(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, token: str | None = None
    ) -> tuple[int, Any]:
        """One HTTP request with the kubeconfig's TLS settings; (status, parsed JSON or text)."""
        import json

        import urllib3

        cfg = yaml.safe_load(self.kubeconfig.read_text())
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == cfg["current-context"])
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        kwargs: dict[str, Any] = {}
        if cluster.get("insecure-skip-tls-verify"):
            kwargs["cert_reqs"] = "CERT_NONE"
        elif cluster.get("certificate-authority-data"):
            import base64

            kwargs["ca_cert_data"] = base64.b64decode(cluster["certificate-authority-data"]).decode()
        elif cluster.get("certificate-authority"):
            kwargs["ca_certs"] = cluster["certificate-authority"]
        pool = urllib3.PoolManager(**kwargs)
        send = {"Authorization": f"Bearer {token if token is not None else user.get('token', '')}"}
        send.update(headers or {})
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            send.setdefault("Content-Type", "application/json")
        response = pool.request(method, cluster["server"] + path, body=data, headers=send, retries=False)
        try:
            return response.status, json.loads(response.data)
        except ValueError:
            return response.status, response.data.decode(errors="replace")

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()


def eventually(observe: Callable[[], T | None], timeout: float = 20.0, what: str = "condition") -> T:
    """Poll ``observe`` until it returns a truthy value (real servers need controllers and time)."""
    from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for

    def _poll() -> Poll[T | None]:
        value = observe()
        return Poll(bool(value), value)

    result = wait_for(_poll, timeout=timeout, what=what, backoff=Backoff(initial=0.05, cap=0.5, factor=1.5))
    assert result is not None
    return result


def dra_stand_in_crds(group: str = "resource.k8s.io", version: str = "v1") -> list[dict[str, Any]]:
    """CRDs standing in for ResourceSlice and DeviceClass on servers without ``resource.k8s.io``
    (Kubernetes < 1.34, e.g. the 1.20 lane). Schemas preserve unknown fields; ``selectableFields``
    (spec.driver, spec.nodeName) only take effect on servers >= 1.30, so field selectors on 1.20 are
    limited to metadata.name/namespace and callers must filter ``spec.driver`` client-side there."""
    crds = []
    for plural, kind, fields in (
        ("resourceslices", "ResourceSlice", ["spec.driver", "spec.nodeName"]),
        ("deviceclasses", "DeviceClass", []),
    ):
        version_entry: dict[str, Any] = {
            "name": version,
            "served": True,
            "storage": True,
            "schema": {
                "openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            },
        }
        if fields:
            version_entry["selectableFields"] = [{"jsonPath": f".{f}"} for f in fields]
        crds.append(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {
                    "name": f"{plural}.{group}",
                    # *.k8s.io groups are protected; "unapproved" is accepted (with a condition).
                    "annotations": {"api-approved.kubernetes.io": "unapproved, metalplane lab stand-in"},
                },
                "spec": {
                    "group": group,
                    "scope": "Cluster",
                    "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                    "versions": [version_entry],
                },
            }
        )
    return crds


def install_dra_stand_ins(
    target: KubeTarget, group: str = "resource.k8s.io", timeout: float = 30.0, version: str = "v1"
) -> bool:
    """Make ResourceSlice/DeviceClass usable on ``target`` under ``group``/``version``: a no-op where
    the server serves them (the emulator, Kubernetes >= 1.34); otherwise install CRD stand-ins and
    wait until they are Established and discoverable. Returns True when stand-ins were installed."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api_client = target.api_client()
    status, _body = target.raw("GET", f"/apis/{group}/{version}")
    if status == 200:
        resources = {r["name"] for r in _body.get("resources", [])}
        if {"resourceslices", "deviceclasses"} <= resources:
            return False
    ext = client.ApiextensionsV1Api(api_client)
    for crd in dra_stand_in_crds(group, version):
        try:
            ext.create_custom_resource_definition(copy.deepcopy(crd))
        except ApiException as exc:
            if exc.status != 409:
                raise

    def _ready() -> bool:
        for crd in dra_stand_in_crds(group, version):
            got = ext.read_custom_resource_definition(crd["metadata"]["name"])
            if not any(c.type == "Established" and c.status == "True" for c in got.status.conditions or []):
                return False
        code, body = target.raw("GET", f"/apis/{group}/{version}")
        return code == 200 and {"resourceslices", "deviceclasses"} <= {r["name"] for r in body.get("resources", [])}

    eventually(_ready, timeout, "DRA stand-in CRDs to be served")
    return True


def wait_deleted(read: Callable[[], Any], timeout: float = 30.0, what: str = "deletion") -> None:
    from kubernetes.client.exceptions import ApiException

    def _gone() -> bool:
        try:
            read()
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    eventually(_gone, timeout, what)


def sleep_briefly(seconds: float = 0.2) -> None:
    """Give an asynchronous server a moment (only used to show something did NOT happen)."""
    time.sleep(seconds)


def thing_crd(*schemas: dict[str, Any] | None, prefix: str = "kcs", status_subresource: bool = False) -> dict[str, Any]:
    """A ``Thing`` CRD in a fresh group ``<prefix><hex>.example.com``, one version per schema.

    ``None`` makes a version without a schema; the first version is the storage version.
    """
    group = f"{prefix}{uuid.uuid4().hex[:6]}.example.com"
    versions = []
    for index, schema in enumerate(schemas):
        version: dict[str, Any] = {"name": f"v{index + 1}", "served": True, "storage": index == 0}
        if status_subresource:
            version["subresources"] = {"status": {}}
        if schema is not None:
            version["schema"] = {"openAPIV3Schema": schema}
        versions.append(version)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
            "versions": versions,
        },
    }
