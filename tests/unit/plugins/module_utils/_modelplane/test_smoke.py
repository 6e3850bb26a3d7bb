"""modelplane_smoke: the engine per GPU generation, the objects (checked against the XRDs), and every way a run ends.

The runs use an in-memory control plane (fake_control.py) whose "Modelplane" places the deployment's replica
on a chosen cluster (or nowhere) and marks it Ready (or not), and a fake HTTP POST for the gateway.
"""

from __future__ import annotations

import copy
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fake_control import MP, Clock, FakeControl, FakeModule
from modelplane_xrd import schema_errors

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    ConflictError,
    InputError,
    NotFoundError,
    WaitTimeout,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import engines, smoke
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia import driver_version, gpus
from ansible_collections.metalplane.inference.plugins.modules.modelplane_smoke import argument_spec

CLUSTER = "vke-ewr-1"
GATEWAY = "203.0.113.10"
URL = f"http://{GATEWAY}/default/smoke-{CLUSTER}/v1/chat/completions"
V100 = {
    "name": "gpu",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 2,
    "attributes": {
        "productName": {"string": "Tesla V100-SXM2-32GB"},
        "architecture": {"string": "Volta"},
        "cudaComputeCapability": {"version": "7.0.0"},
    },
    "capacity": {"memory": {"value": "32768Mi"}},
}
L40S = {
    "name": "gpu",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 1,
    "attributes": {"architecture": {"string": "Ada Lovelace"}, "cudaComputeCapability": {"version": "8.9.0"}},
    "capacity": {"memory": {"value": "46068Mi"}},
}
ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "qwen",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes, it serves."}, "finish_reason": "stop"}],
}
READY = [
    {"type": "ClusterReady", "status": "True", "reason": "ClusterRunning"},
    {"type": "BackendReady", "status": "True", "reason": "BackendHealthy"},
    {"type": "Ready", "status": "True"},
]


def target(device: dict[str, Any] | None = None) -> smoke.Target:
    return smoke.Target(cluster=CLUSTER, pool="l40s", class_name="l40s-1x", device=L40S if device is None else device)


# ---- the engine per GPU generation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "image", "half", "generation"),
    [
        ({"cudaComputeCapability": {"version": "7.0.0"}}, engines.VOLTA_IMAGE, True, "Volta (V100)"),
        ({"architecture": {"string": "Volta"}}, engines.VOLTA_IMAGE, True, "Volta (V100)"),
        ({"cudaComputeCapability": {"version": "7.5.0"}}, engines.MODERN_IMAGE, True, "Turing (T4)"),
        ({"cudaComputeCapability": {"version": "8.6.0"}}, engines.MODERN_IMAGE, False, "Ampere"),
        ({"architecture": {"string": "Hopper"}}, engines.MODERN_IMAGE, False, "Ampere"),
        ({"cudaComputeCapability": {"version": "10.0.0"}}, engines.MODERN_IMAGE, False, "Ampere"),
        ({}, engines.MODERN_IMAGE, False, "Ampere"),  # nothing known: the current engine
    ],
    ids=["volta-cc", "volta-arch", "turing", "ampere", "hopper-arch", "blackwell", "unknown"],
)
def test_engine_fits_the_gpu_generation(attributes: dict[str, Any], image: str, half: bool, generation: str) -> None:
    engine = engines.engine_for({"attributes": attributes}, model="m/x", served_model_name="x", gpus=1, image=None)
    assert engine["image"] == image
    assert ("--dtype=half" in engine["args"]) is half  # no bfloat16 before compute capability 8.0
    assert engine["generation"].startswith(generation)
    assert engine["args"][:2] == ["--model=m/x", "--served-model-name=x"]


def test_engine_for_the_captured_h200() -> None:
    """The GPU a real H200's ``nvidia-smi -q -x`` reported (tests/unit/fixtures/nvidia), resolved by its PCI device id
    through the driver preflight's GPU table to its compute capability, picks the bf16 engine; so does the
    architecture nvidia-smi printed."""
    xml = Path(__file__).parents[3] / "fixtures" / "nvidia" / "h200-580.159.04-open" / "nvidia-smi-q.xml"
    (reported,) = driver_version.parse_smi_xml(xml.read_text()).gpus
    model = gpus.lookup(f"0x{reported.pci_device_id}")
    for attributes in (
        {"cudaComputeCapability": {"version": f"{model.compute_capability}.0"}},
        {"architecture": {"string": reported.architecture}},
    ):
        engine = engines.engine_for({"attributes": attributes}, model="m", served_model_name="m", gpus=1, image=None)
        assert (engine["compute_capability"], engine["image"]) == ("9.0", engines.MODERN_IMAGE)
        assert "--dtype=half" not in engine["args"]


@pytest.mark.parametrize("gpu", gpus.MODELS, ids=lambda m: m.name)
def test_engine_table_agrees_with_the_gpu_table(gpu: gpus.GpuModel) -> None:
    """Every GPU the collection knows gets the same engine from its compute capability as from its architecture
    name (the two attributes the NVIDIA DRA driver publishes), bf16 only from 8.0 and nothing below Volta."""
    by_cc = {"attributes": {"cudaComputeCapability": {"version": f"{gpu.compute_capability}.0"}}}
    by_arch = {"attributes": {"architecture": {"string": gpu.architecture}}}
    cc = tuple(int(part) for part in gpu.compute_capability.split("."))
    if cc < (7, 0):
        for device in (by_cc, by_arch):
            with pytest.raises(InputError):
                engines.engine_for(device, model="m", served_model_name="m", gpus=1, image=None)
        return
    engine = engines.engine_for(by_cc, model="m", served_model_name="m", gpus=1, image=None)
    same = engines.engine_for(by_arch, model="m", served_model_name="m", gpus=1, image=None)
    assert (engine["image"], engine["args"]) == (same["image"], same["args"])
    assert ("--dtype=half" in engine["args"]) is (cc < (8, 0))
    assert (engine["image"] == engines.VOLTA_IMAGE) is (gpu.architecture == "Volta")


def test_engine_for_pascal_needs_an_image() -> None:
    pascal = {"attributes": {"cudaComputeCapability": {"version": "6.1.0"}}}
    with pytest.raises(InputError) as caught:
        engines.engine_for(pascal, model="m", served_model_name="m", gpus=1, image=None)
    assert caught.value.field == "image"
    assert "6.1" in caught.value.msg
    given = engines.engine_for(pascal, model="m", served_model_name="m", gpus=1, image="my/engine:1")
    assert given["image"] == "my/engine:1"


def test_engine_args_tensor_parallel_cache_and_extra() -> None:
    engine = engines.engine_for(
        V100, model="m", served_model_name="s", gpus=2, image=None, extra_args=["--enforce-eager"], cached=True
    )
    assert engine["args"] == [
        "--served-model-name=s",  # cached: Modelplane passes --model=/mnt/models itself
        "--dtype=half",
        *engines.SMOKE_ARGS,
        "--tensor-parallel-size=2",
        "--enforce-eager",
    ]


# ---- pure parts -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cluster", "name", "want"),
    [
        ("vke-ewr-1", None, "smoke-vke-ewr-1"),
        ("c" * 63, None, None),  # shortened with a hash
        ("vke-ewr-1", "mine", "mine"),
    ],
)
def test_object_name(cluster: str, name: str | None, want: str | None) -> None:
    got = smoke.object_name(cluster, name)
    assert len(got) <= smoke.MAX_NAME
    if want is not None:
        assert got == want
    else:
        assert got.startswith("smoke-ccc")
        assert got != smoke.object_name("c" * 62)


@pytest.mark.parametrize(("gpus", "ok"), [(1, True), (2, True), (3, False), (0, False)])
def test_check_single_node(gpus: int, ok: bool) -> None:
    if ok:
        smoke.check_single_node(gpus, target(V100))
        return
    with pytest.raises(InputError) as caught:
        smoke.check_single_node(gpus, target(V100))
    assert caught.value.field == "gpus"
    if gpus > 2:
        assert "no GPU fabric" in caught.value.msg or "GPU fabric" in caught.value.msg
        assert "single-node only" in caught.value.msg


@pytest.mark.parametrize(
    ("device", "selectors"),
    [
        (
            V100,
            [
                'device.driver == "gpu.nvidia.com"',
                'device.attributes["gpu.nvidia.com"].productName == "Tesla V100-SXM2-32GB"',
            ],
        ),
        (
            L40S,
            [
                'device.driver == "gpu.nvidia.com"',
                'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("46068Mi")) >= 0',
            ],
        ),
    ],
)
def test_device_selectors_pin_the_pool_gpu(device: dict[str, Any], selectors: list[str]) -> None:
    assert [s["cel"] for s in smoke.device_selectors(device)] == selectors


@pytest.mark.parametrize("cache", [None, "smoke-x"])
def test_objects_are_valid_to_the_xrds(cache: str | None) -> None:
    engine = engines.engine_for(L40S, model="Qwen/Q", served_model_name="q", gpus=1, image=None)
    md = smoke.model_deployment("smoke-x", "default", target(), gpus=1, engine=engine, cache=cache)
    assert schema_errors("modeldeployments", md) == []
    spec = md["spec"]["template"]["spec"]
    assert spec["clusterSelector"] == {"matchLabels": {"metalplane.inference/cluster": CLUSTER}}
    assert spec["engines"][0]["members"][0]["template"]["spec"]["containers"][0]["name"] == "engine"
    assert ("modelCacheRef" in spec) is (cache is not None)
    ms = smoke.model_service("smoke-x", "default", CLUSTER, "smoke-x")
    assert schema_errors("modelservices", ms) == []
    mc = smoke.model_cache("smoke-x", "default", CLUSTER, model="Qwen/Q", size_gib=5)
    assert schema_errors("modelcaches", mc) == []


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("<html>", "not JSON"),
        ("[]", "not a JSON object"),
        (json.dumps({"choices": []}), "no choices[0]"),
        (json.dumps({"choices": [{"message": {"content": 3}}]}), "content string"),
        (json.dumps({**ANSWER, "object": "text_completion"}), "'text_completion'"),
    ],
)
def test_openai_answer_refuses(body: str, needle: str) -> None:
    with pytest.raises(ApiError) as caught:
        smoke.openai_answer(body)
    assert "not an OpenAI chat completion" in caught.value.msg
    assert needle in caught.value.msg


def test_openai_answer_and_first_tokens() -> None:
    words = " ".join(f"w{i}" for i in range(40))
    answer = smoke.openai_answer(json.dumps({**ANSWER, "choices": [{"message": {"content": words}}]}))
    assert answer["text"] == words
    assert answer["first_tokens"] == " ".join(f"w{i}" for i in range(smoke.ANSWER_WORDS)) + " ..."


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("203.0.113.10", "http://203.0.113.10/ns/svc/v1/chat/completions"),
        ("127.0.0.1:8080/", "http://127.0.0.1:8080/ns/svc/v1/chat/completions"),
        ("https://gw.example.com", "https://gw.example.com/ns/svc/v1/chat/completions"),
    ],
)
def test_chat_url(address: str, url: str) -> None:
    assert smoke.chat_url(address, "ns", "svc") == url


def test_pod_diagnosis_names_the_pod_and_its_last_event() -> None:
    pods = [
        {"metadata": {"name": "other-1"}, "status": {"phase": "Running"}},
        {
            "metadata": {"name": "smoke-x-abcde-engine-7d9"},
            "status": {
                "phase": "Pending",
                "containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}}],
            },
        },
    ]
    events = [
        {
            "involvedObject": {"name": "smoke-x-abcde-engine-7d9"},
            "lastTimestamp": "2026-01-01T00:00:01Z",
            "reason": "Scheduled",
            "message": "assigned",
        },
        {
            "involvedObject": {"name": "smoke-x-abcde-engine-7d9"},
            "lastTimestamp": "2026-01-01T00:00:09Z",
            "reason": "Failed",
            "message": "pull failed",
        },
    ]
    text = smoke.pod_diagnosis("smoke-x-abcde", pods, events)
    assert text == (
        "pod smoke-x-abcde-engine-7d9 Pending (ImagePullBackOff: not found), last event Failed: pull failed"
    )
    assert "no pod named smoke-x-abcde-*" in smoke.pod_diagnosis("smoke-x-abcde", pods[:1], [])


# ---- runs ---------------------------------------------------------------------------------------------------


def control_plane(*, place_on: str | None = CLUSTER, ready: bool = True, gateway: bool = True) -> FakeControl:
    control = FakeControl()
    control.place_on = place_on
    control.replica_ready = ready
    control.seed(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "inferencegateways.modelplane.ai"},
        }
    )
    control.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    if gateway:
        control.seed(
            {
                "apiVersion": MP,
                "kind": "InferenceGateway",
                "metadata": {"name": "default"},
                "spec": {"backend": "Traefik", "traefik": {"version": "40.2.0"}},
                "status": {"address": GATEWAY, "conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
    control.seed(
        {"apiVersion": MP, "kind": "InferenceClass", "metadata": {"name": "l40s-1x"}, "spec": {"devices": [L40S]}}
    )
    control.seed(
        {
            "apiVersion": MP,
            "kind": "InferenceCluster",
            "metadata": {"name": CLUSTER, "labels": {"metalplane.inference/cluster": CLUSTER}},
            "spec": {"cluster": {"source": "Existing"}, "nodePools": [{"name": "l40s", "className": "l40s-1x"}]},
            "status": {
                "gateway": {"address": "127.0.0.1:1"},
                "conditions": READY,
                "cache": {"storageClassName": "modelplane-rwx-longhorn"},
            },
        }
    )
    return control


class Gateway:
    """The fake POST: answers in order (the last one repeats); records the requests."""

    def __init__(self, *answers: tuple[int, str] | OSError) -> None:
        self.answers = list(answers) or [(200, json.dumps(ANSWER))]
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, url: str, body: dict[str, Any], timeout: float) -> tuple[int, str]:
        self.requests.append((url, body))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, OSError):
            raise answer  # pylint: disable=raising-bad-type  # an OSError, checked on the line above
        return answer


def run(
    control: FakeControl, gateway: Gateway | None = None, *, check: bool = False, workload: Any = None, **overrides: Any
) -> dict[str, Any]:
    params = {name: copy.deepcopy(spec.get("default")) for name, spec in argument_spec().items()}
    params.update(
        kubeconfig="/cp.kubeconfig",
        cluster=CLUSTER,
        model="Qwen/Qwen2.5-0.5B-Instruct",
        served_model_name="qwen",
        wait_timeout=60,
    )
    params.update(overrides)
    clock = Clock()

    def connector(_params: Any, which: str) -> Any:
        if which == "workload":
            assert workload is not None
            return workload
        return control

    return smoke.run_modelplane_smoke(
        FakeModule(params, check=check), connector, gateway or Gateway(), clock=clock, sleep=clock.sleep
    )


def smoke_objects(control: FakeControl) -> list[str]:
    return sorted(
        f"{k[1]} {k[3]}"
        for k in control.objects
        if k[1] in ("ModelDeployment", "ModelService", "ModelCache", "ModelReplica")
    )


def test_a_served_chat_completion_and_nothing_left() -> None:
    control, gateway = control_plane(), Gateway()
    result = run(control, gateway)
    assert gateway.requests == [
        (
            URL,
            {
                "model": "qwen",
                "messages": [{"role": "user", "content": smoke.DEFAULT_PROMPT}],
                "max_tokens": 32,
                "temperature": 0,
            },
        )
    ]
    assert result["answer"]["text"] == "Yes, it serves."
    assert result["replica"] == {"name": f"smoke-{CLUSTER}-abcde", "cluster": CLUSTER, "ready": True}
    assert result["smoke"] == {"request": f"POST {URL} model=qwen", "answer": "Yes, it serves."}
    assert result["changed"] is False  # everything it created is gone again
    assert [w[:2] for w in control.writes] == [
        ("create", "ModelDeployment"),
        ("create", "ModelService"),
        ("delete", "ModelService"),
        ("delete", "ModelDeployment"),
    ]
    assert smoke_objects(control) == []
    for obj in control.created:
        plural = {"ModelDeployment": "modeldeployments", "ModelService": "modelservices"}[obj["kind"]]
        assert schema_errors(plural, obj) == [], obj["kind"]


def test_a_cache_is_created_first_and_removed_last() -> None:
    control = control_plane()
    run(control, cache_size_gib=5)
    writes = [w[:2] for w in control.writes]
    assert writes[0] == ("create", "ModelCache")
    assert writes[-1] == ("delete", "ModelCache")
    assert control.created[1]["spec"]["template"]["spec"]["modelCacheRef"] == {"name": f"smoke-{CLUSTER}"}
    assert schema_errors("modelcaches", control.created[0]) == []


def test_check_mode_plans_and_writes_nothing() -> None:
    control, gateway = control_plane(gateway=False), Gateway()
    result = run(control, gateway, check=True)
    assert control.writes == []
    assert gateway.requests == []
    assert result["changed"] is False
    assert result["answer"] is None
    assert result["actions"][:2] == [
        f"create ModelDeployment default/smoke-{CLUSTER}",
        f"create ModelService default/smoke-{CLUSTER}",
    ]


def test_check_mode_before_the_adoption_says_so() -> None:
    control = control_plane()
    control.objects.pop((MP, "InferenceCluster", None, CLUSTER))
    result = run(control, check=True)
    assert result["changed"] is False
    assert result["actions"] == [
        f"run the smoke test once InferenceCluster {CLUSTER} serves (a dry run does not adopt it)"
    ]
    assert control.writes == []


def test_leftovers_of_an_interrupted_run_are_removed_first() -> None:
    control = control_plane()
    leftover = smoke.model_service(f"smoke-{CLUSTER}", "default", CLUSTER, "x")
    control.seed(leftover)
    result = run(control)
    assert result["changed"] is True
    assert result["removed"] == [f"ModelService default/smoke-{CLUSTER}"]
    assert smoke_objects(control) == []
    absent = run(control, state="absent")
    assert absent == {"changed": False, "actions": [], "removed": []}


@pytest.mark.parametrize(
    ("overrides", "error", "field"),
    [
        ({"gpus": 2}, InputError, "gpus"),  # the L40S nodes have one GPU: multi-node, refused
        ({"pool": "h100"}, InputError, "pool"),
        ({"namespace": "ml-team"}, InputError, "namespace"),
        ({"model": ""}, InputError, "model"),
        ({"max_tokens": 0}, InputError, "max_tokens"),
    ],
)
def test_bad_input_is_refused_before_any_write(overrides: dict[str, Any], error: type, field: str) -> None:
    control = control_plane()
    with pytest.raises(error) as caught:
        run(control, **overrides)
    assert caught.value.field == field
    assert control.writes == []


def test_the_fabric_limit_is_named() -> None:
    with pytest.raises(InputError) as caught:
        run(control_plane(), gpus=2)
    assert "VKE GPU nodes have none" in caught.value.msg


@pytest.mark.parametrize(
    ("change", "error", "needle"),
    [
        (
            lambda c: c.objects.pop(
                ("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "inferencegateways.modelplane.ai")
            ),
            NotFoundError,
            "inferencegateways.modelplane.ai",
        ),
        (lambda c: c.objects.pop((MP, "InferenceCluster", None, CLUSTER)), NotFoundError, "adopt it first"),
        (
            lambda c: c.objects[(MP, "InferenceCluster", None, CLUSTER)]["status"].update(conditions=READY[:2]),
            NotFoundError,
            "condition Ready not reported",
        ),
        (
            lambda c: c.objects[(MP, "InferenceCluster", None, CLUSTER)]["metadata"].update(labels={}),
            NotFoundError,
            "metalplane.inference/cluster",
        ),
        (lambda c: c.objects.pop((MP, "InferenceGateway", None, "default")), WaitTimeout, "InferenceGateway 'default'"),
    ],
    ids=["no-gateway-crd", "no-cluster", "cluster-not-serving", "cluster-unlabelled", "no-gateway"],
)
def test_the_control_plane_is_checked_before_any_write(change: Any, error: type, needle: str) -> None:
    control = control_plane()
    change(control)
    with pytest.raises(error) as caught:
        run(control)
    assert needle in caught.value.msg
    assert control.writes == []


def test_not_scheduled_names_the_condition_and_cleans_up() -> None:
    control = control_plane(place_on=None)
    control.scheduled_condition = {
        "type": "ReplicasScheduled",
        "status": "False",
        "reason": "InsufficientCapacity",
        "message": "vke-ewr-1: no pool has devices for every device request",
    }
    with pytest.raises(WaitTimeout) as caught:
        run(control)
    assert caught.value.msg.startswith("not scheduled: ModelDeployment default/smoke-vke-ewr-1")
    assert "condition ReplicasScheduled=False (InsufficientCapacity; vke-ewr-1: no pool" in caught.value.msg
    assert smoke_objects(control) == []


def test_scheduled_on_another_cluster_is_a_conflict() -> None:
    control = control_plane(place_on="other")
    with pytest.raises(ConflictError) as caught:
        run(control)
    assert "'other', not 'vke-ewr-1'" in caught.value.msg
    assert smoke_objects(control) == []


@pytest.mark.parametrize("with_workload", [False, True])
def test_not_ready_names_the_pod_and_its_last_event(with_workload: bool) -> None:
    control = control_plane(ready=False)
    workload = FakeControl()
    workload.seed(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"smoke-{CLUSTER}-abcde-0", "namespace": "default"},
            "status": {"phase": "Pending"},
        }
    )
    workload.seed(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "e1", "namespace": "default"},
            "involvedObject": {"name": f"smoke-{CLUSTER}-abcde-0"},
            "reason": "FailedScheduling",
            "message": "0/2 nodes are available",
        }
    )
    kwargs = {"workload": workload, "workload_kubeconfig": "/w.kubeconfig"} if with_workload else {}
    with pytest.raises(WaitTimeout) as caught:
        run(control, **kwargs)
    assert caught.value.msg.startswith(f"not Ready: ModelReplica default/smoke-{CLUSTER}-abcde")
    assert "condition Ready=False (Creating)" in caught.value.msg
    if with_workload:
        assert "last event FailedScheduling: 0/2 nodes are available" in caught.value.msg
    else:
        assert "set workload_kubeconfig" in caught.value.msg
    assert smoke_objects(control) == []


@pytest.mark.parametrize(
    ("answers", "needle"),
    [
        ([(503, "no available server\n")], "kept refusing POST"),
        ([ConnectionRefusedError(111, "refused")], "ConnectionRefusedError"),
        ([(401, "unauthorized")], "refused POST"),
        ([(200, "<html>ok</html>")], "not an OpenAI chat completion"),
    ],
    ids=["unrouted", "no-connection", "refused", "not-openai"],
)
def test_gateway_failures_are_explained_and_cleaned_up(answers: list[Any], needle: str) -> None:
    control = control_plane()
    with pytest.raises(ApiError) as caught:
        run(control, Gateway(*answers))
    assert needle in caught.value.msg
    assert smoke_objects(control) == []


def test_the_route_converging_is_retried() -> None:
    gateway = Gateway((404, "404 page not found\n"), (503, "no available server\n"), (200, json.dumps(ANSWER)))
    result = run(control_plane(), gateway)
    assert len(gateway.requests) == 3
    assert result["answer"]["first_tokens"] == "Yes, it serves."


def test_keep_objects_leaves_them_and_reports_a_change() -> None:
    control = control_plane()
    result = run(control, keep_objects=True)
    assert result["changed"] is True
    assert smoke_objects(control) == [
        f"ModelDeployment smoke-{CLUSTER}",
        f"ModelReplica smoke-{CLUSTER}-abcde",
        f"ModelService smoke-{CLUSTER}",
    ]


class _Answering(BaseHTTPRequestHandler):
    """Answers every POST with the status its path names (``/503``) and echoes the JSON body it got."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        status = int(self.path.strip("/"))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"got": json.loads(body), "type": self.headers["Content-Type"]}).encode())

    def log_message(self, *args: Any) -> None:
        """Quiet: the test reads the answers, not the log."""


@pytest.fixture(scope="module")
def answering() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("status", [200, 404, 503])
def test_http_post_returns_every_http_answer(answering: str, status: int) -> None:
    """An HTTP answer of any status is returned, so that _chat can retry a 503 and explain a 401."""
    code, text = smoke.http_post(f"{answering}/{status}", {"model": "m"}, 5)
    assert code == status
    assert json.loads(text) == {"got": {"model": "m"}, "type": "application/json"}


def test_http_post_without_an_answer_raises_oserror() -> None:
    with socket.socket() as sock:  # a port nothing listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        with pytest.raises(OSError, match="refused"):
            smoke.http_post(f"http://127.0.0.1:{sock.getsockname()[1]}/v1/chat/completions", {}, 5)
