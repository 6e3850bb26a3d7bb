"""Benchmark of kube_ready against kubernetes.core.k8s_info ``wait: true`` on the same object.

Two figures, both against the Kubernetes emulator (tests/lab/kube/server.py), both through real
``ansible-playbook`` runs:

1. Notice latency: the time from "the object became ready" (its Ready condition written on the
   server) to "the module returned" (the task's end time in the ansible.posix.json report). The
   object becomes ready 1-3 s (random) after the module started looking at it (its first request on
   the object's path), so the wait is really in progress. Target for kube_ready: median < 1 s.
2. API requests over a 30 s wait on an object that never becomes ready (``timeout``/``wait_timeout``
   30), counted from the emulator's request log (discovery included).

Variants: kube_ready; k8s_info with its default ``wait_sleep`` (5 s in kubernetes.core 6.x); k8s_info
with ``wait_sleep: 1`` (so a short wait polls more than once). A fresh emulator (new port) serves each
run, so kubernetes.core's host-keyed discovery cache never goes stale.

Run: ``PYTHONPATH=tests .venv/bin/python -m bench.bench_kube [--reps 5] [--write docs/benchmarks/kube.md]``.
Not collected by pytest; tests never assert on wall time.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from lab.kube.server import KubeEmulator
from support.collection import install_collection_finder
from support.playbook import run_playbook

install_collection_finder()

API = "test.metalplane.io/v1"
PATH = "/apis/test.metalplane.io/v1/namespaces/default/widgets"
CRD: dict[str, Any] = {
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
VARIANTS = ("kube_ready", "k8s_info (wait_sleep default)", "k8s_info (wait_sleep: 1)")


def task(variant: str, kubeconfig: str, timeout: int) -> dict[str, Any]:
    if variant == "kube_ready":
        args: dict[str, Any] = {"kubeconfig": kubeconfig, "api_version": API, "kind": "Widget",
                                "namespace": "default", "name": "w", "wait_timeout": timeout}  # fmt: skip
        return {"name": "wait", "metalplane.inference.kube_ready": args, "ignore_errors": True}
    args = {"kubeconfig": kubeconfig, "api_version": API, "kind": "Widget", "namespace": "default", "name": "w",
            "wait": True, "wait_timeout": timeout, "wait_condition": {"type": "Ready", "status": "True"}}  # fmt: skip
    if variant.endswith("wait_sleep: 1)"):
        args["wait_sleep"] = 1
    return {"name": "wait", "kubernetes.core.k8s_info": args, "ignore_errors": True}


def seeded() -> KubeEmulator:
    api = KubeEmulator(delay_scale=1.0, name="bench").start()
    api.create(CRD)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            api.list(API, "Widget", namespace="default")
            break
        except Exception:
            time.sleep(0.05)
    api.create({"apiVersion": API, "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}})
    api.set_status(API, "Widget", "w", {"conditions": [{"type": "Ready", "status": "False", "reason": "Starting"}]},
                   namespace="default")  # fmt: skip
    return api


def object_requests(api: KubeEmulator) -> list[Any]:
    return [r for r in api.requests if r.path.startswith(PATH)]


def parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def latency_run(variant: str) -> float:
    """Seconds from the object becoming ready to the task's end."""
    api = seeded()
    marks: dict[str, float] = {}

    def flip() -> None:
        deadline = time.monotonic() + 60
        while not object_requests(api) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(random.uniform(1.0, 3.0))
        api.set_status(API, "Widget", "w", {"conditions": [{"type": "Ready", "status": "True"}]}, namespace="default")
        marks["ready"] = time.time()

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    try:
        run = run_playbook([task(variant, str(api.kubeconfig_path), 30)])
    finally:
        api.stop()
    thread.join(5)
    result = run.task("wait")
    if result.get("failed"):
        raise RuntimeError(f"{variant}: {result.get('msg')}")
    end = None
    for play in run.report.get("plays", []):
        for item in play.get("tasks", []):
            if item["task"]["name"] == "wait":
                end = parse_time(item["task"]["duration"]["end"])
    assert end is not None
    return end - marks["ready"]


def inprocess_latency() -> float:
    """Seconds from ready to ``watch.follow`` returning, in-process (no Ansible process overhead)."""
    from ansible_collections.metalplane.inference.plugins.module_utils._kube import readiness
    from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import KubeClient
    from ansible_collections.metalplane.inference.plugins.module_utils._kube.watch import KubeFeed, WatchSpec, follow

    api = seeded()
    client = KubeClient.from_auth({"kubeconfig": str(api.kubeconfig_path)})
    compiled = readiness.compile_expression(None)
    spec = WatchSpec("objects", API, "Widget", "default", field_selector="metadata.name=w")
    marks: dict[str, float] = {}

    def flip() -> None:
        deadline = time.monotonic() + 30
        while not [r for r in object_requests(api) if "watch=true" in r.query] and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(random.uniform(0.2, 0.5))
        api.set_status(API, "Widget", "w", {"conditions": [{"type": "Ready", "status": "True"}]}, namespace="default")
        marks["ready"] = time.monotonic()

    threading.Thread(target=flip, daemon=True).start()
    try:
        outcome = follow(
            KubeFeed(client), [spec], lambda s: readiness.assess(compiled, s["objects"].values(), name="w"), timeout=30
        )
        done = time.monotonic()
    finally:
        client.close()
        api.stop()
    if not outcome.ready:
        raise RuntimeError("in-process wait did not see the object ready")
    return done - marks["ready"]


def requests_run(variant: str, seconds: int) -> tuple[int, int, float]:
    """(all API requests, requests on the object's path, wall seconds) for a wait that times out."""
    api = seeded()
    started = time.monotonic()
    try:
        run_playbook([task(variant, str(api.kubeconfig_path), seconds)])
    finally:
        api.stop()
    return len(api.requests), len(object_requests(api)), time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--wait", type=int, default=30)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    latencies: dict[str, list[float]] = {}
    for variant in VARIANTS:
        latencies[variant] = [latency_run(variant) for _attempt in range(args.reps)]
        print(variant, "latencies", [round(x, 3) for x in latencies[variant]], flush=True)
    inproc = [inprocess_latency() for _attempt in range(args.reps * 2)]
    print("in-process latencies", [round(x, 4) for x in inproc], flush=True)
    counts = {}
    for variant in VARIANTS:
        counts[variant] = requests_run(variant, args.wait)
        print(variant, "requests over", args.wait, "s:", counts[variant], flush=True)
    lines = [
        "| variant | notice latency median (s) | min / max (s) | API requests in a "
        f"{args.wait} s wait (all / on the object) |",
        "|---|---|---|---|",
    ]
    for variant in VARIANTS:
        values = latencies[variant]
        total, on_object, _wall = counts[variant]
        lines.append(
            f"| {variant} | {statistics.median(values):.2f} | {min(values):.2f} / {max(values):.2f} | "
            f"{total} / {on_object} |"
        )
    lines.append(
        f"| kube_ready engine in-process (watch.follow, no Ansible) | {statistics.median(inproc) * 1000:.1f} ms | "
        f"{min(inproc) * 1000:.1f} / {max(inproc) * 1000:.1f} ms | (same requests as kube_ready) |"
    )
    table = "\n".join(lines)
    print(table)
    if args.write:
        text = args.write.read_text() if args.write.exists() else ""
        marker_start, marker_end = "<!-- bench_kube:start -->", "<!-- bench_kube:end -->"
        block = f"{marker_start}\n{table}\n\n(reps={args.reps}, measured {time.strftime('%Y-%m-%d')})\n{marker_end}"
        if marker_start in text:
            head, rest = text.split(marker_start, 1)
            text = head + block + rest.split(marker_end, 1)[1]
        else:
            text += "\n" + block + "\n"
        args.write.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
