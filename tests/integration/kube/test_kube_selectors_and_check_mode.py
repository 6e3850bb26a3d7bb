"""A malformed selector fails naming its option before any request; gpu_ready's check mode reports once.

Both through ansible-playbook, on the emulator and on the real lane. The selector tests run a second
task with a well-formed selector in the same play: its one list shows that the request record does
see the module's lists, so "no list from the first task" is a real observation.
"""

from __future__ import annotations

from typing import Any

from kube_helpers import list_requests, watch_requests

WIDGETS = "/apis/test.metalplane.io/v1/namespaces/default/widgets"
NODES = "/api/v1/nodes"
EXAMPLE = "expected e.g. 'app=x,tier in (a,b)'"


def selector_requests(kube: Any, path_part: str) -> list[Any]:
    """Every list or watch of ``path_part``, answered or refused (a 400 would be one)."""
    return [r for r in kube.requests() if r.verb in ("list", "watch") and r.path.endswith(path_part)]


def test_kube_ready_malformed_label_selectors_name_the_option(kube: Any, unique: str, playbook: Any) -> None:
    kube.ensure_widget_kind()
    kube.widget(unique, "True", labels={"set": unique})
    options = {"kubeconfig": kube.kubeconfig, "api_version": "test.metalplane.io/v1", "kind": "Widget",
               "namespace": "default", "wait_timeout": 10}  # fmt: skip
    run = playbook(
        [
            {
                "name": "bad",
                "metalplane.inference.kube_ready": {**options, "label_selectors": [f"set={unique}", "tier in (a,b"]},
                "register": "bad",
                "ignore_errors": True,
            },
            {
                "name": "good",
                "metalplane.inference.kube_ready": {**options, "label_selectors": [f"set={unique}"]},
                "register": "good",
                "ignore_errors": True,
            },
        ]
    )
    bad = run.task("bad")
    assert bad["failed"] is True
    assert bad["msg"] == (
        f"label_selectors: missing ')' after the values of 'tier in' in 'set={unique},tier in (a,b'; {EXAMPLE}"
    )
    assert "HTTP 400" not in bad["msg"]
    good = run.task("good")
    assert good.get("failed") is not True, good
    assert good["ready"] is True
    # Only the good task's list (and its watch, on the emulator seen when it opens) reached the API.
    assert len([r for r in selector_requests(kube, WIDGETS) if r.verb == "list"]) == 1
    if kube.emulator is not None:
        assert all(f"set%3D{unique}" in r.query or f"set={unique}" in r.query for r in selector_requests(kube, WIDGETS))


def test_gpu_ready_malformed_node_selector_names_the_option(kube: Any, unique: str, playbook: Any) -> None:
    options = {"kubeconfig": kube.kubeconfig, "checks": ["allocatable"], "wait_timeout": 0}
    run = playbook(
        [
            {
                "name": "bad",
                "metalplane.inference.gpu_ready": {**options, "node_selector": {"modelplane.ai/pool": "gpu pool"}},
                "register": "bad",
                "ignore_errors": True,
            },
            {
                "name": "bad-string",
                "metalplane.inference.gpu_ready": {**options, "node_selector": "modelplane.ai/pool=,"},
                "register": "bad_string",
                "ignore_errors": True,
            },
            {
                # Well-formed, matching no node: one list, then a timeout (not an input error).
                "name": "good",
                "metalplane.inference.gpu_ready": {**options, "node_selector": f"modelplane.ai/pool={unique}"},
                "register": "good",
                "ignore_errors": True,
            },
        ]
    )
    bad = run.task("bad")
    assert bad["failed"] is True
    assert bad["msg"].startswith("node_selector: label value 'gpu pool' of 'modelplane.ai/pool' is not valid"), bad
    bad_string = run.task("bad-string")
    assert bad_string["failed"] is True
    assert bad_string["msg"] == f"node_selector: the selector ends with ',' in 'modelplane.ai/pool=,'; {EXAMPLE}"
    good = run.task("good")
    assert good["failed"] is True
    assert good["msg"].startswith("Timed out after 0s waiting for GPU readiness (allocatable)"), good
    node_lists = [r for r in selector_requests(kube, NODES) if r.verb == "list"]
    assert len(node_lists) == 1  # the good task's; the malformed ones sent nothing


def test_gpu_ready_check_mode_reports_without_waiting(kube: Any, gpu: Any, playbook: Any) -> None:
    g1 = gpu.add_gpu_node("g1", gpus=2, device_plugin=False)
    gpu.install_validator(ready_after=None)
    args = {"kubeconfig": kube.kubeconfig, **gpu.args, "gpus_per_node": 2, "wait_timeout": 60}
    task = {"name": "gpu", "metalplane.inference.gpu_ready": args, "register": "out", "ignore_errors": True}
    kube.mark()  # the gpu fixture lists pods to see them held; only the module's requests count
    result = playbook([task], check=True).task("gpu")
    # Waiting would end in a failed timeout (nothing becomes ready): check mode reports the one
    # evaluation instead, not ready and not failed, without the failure-only validator pod list.
    assert result.get("failed") is not True, result
    assert (result["ready"], result["changed"], result["elapsed"]) == (False, False, 0.0)
    assert result["checks"]["operator"]["ready"] is False
    assert result["nodes"][g1]["missing"] == ["allocatable nvidia.com/gpu 0 < 2"]
    assert len(list_requests(kube, NODES)) == 1  # one list per kind, no watch
    assert len(list_requests(kube, gpu.daemonsets)) == 1
    assert watch_requests(kube, NODES) == []
    assert watch_requests(kube, gpu.daemonsets) == []
    assert list_requests(kube, f"/api/v1/namespaces/{gpu.namespace}/pods") == []
    if kube.emulator is not None:  # the emulator logs every request: nothing but reads
        assert {r.method for r in kube.emulator.requests} == {"GET"}
