"""modelplane_gateway: the InferenceGateway built to the XRD, checked, created once, deleted only when ours."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fake_control import MP, Clock, FakeControl, FakeModule
from modelplane_xrd import schema_errors

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    InputError,
    NotFoundError,
    WaitTimeout,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import gateway
from ansible_collections.metalplane.inference.plugins.modules.modelplane_gateway import argument_spec

MANAGED = {"app.kubernetes.io/managed-by": "metalplane.inference"}
READY = {"address": "203.0.113.10", "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}]}
KEY = (MP, "InferenceGateway", None, "default")


@pytest.mark.parametrize(
    ("kwargs", "traefik"),
    [
        ({}, {"version": "40.2.0"}),
        (
            {"load_balancer": "MetalLB", "metallb_address_pool": "172.18.255.200-172.18.255.250"},
            {
                "version": "40.2.0",
                "loadBalancer": "MetalLB",
                "metallb": {"addressPool": "172.18.255.200-172.18.255.250"},
            },
        ),
    ],
)
def test_gateway_is_valid_to_the_xrd(kwargs: dict[str, Any], traefik: dict[str, Any]) -> None:
    obj = gateway.inference_gateway(**kwargs)
    assert schema_errors("inferencegateways", obj) == []
    assert obj["metadata"] == {"name": "default", "labels": MANAGED}
    assert obj["spec"] == {"backend": "Traefik", "traefik": traefik}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"backend": "Envoy"}, "backend"),
        ({"traefik_version": " "}, "traefik_version"),
        ({"load_balancer": "MetalLB"}, "metallb_address_pool"),  # a CEL rule of the XRD
        ({"load_balancer": "F5"}, "load_balancer"),
        ({"metallb_address_pool": "10.0.0.1-10.0.0.9"}, "metallb_address_pool"),
    ],
)
def test_gateway_input_errors(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        gateway.inference_gateway(**kwargs)
    assert caught.value.field == field


def control_plane(live: dict[str, Any] | None = None, *, crd: bool = True) -> FakeControl:
    control = FakeControl()
    if crd:
        control.seed(
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "inferencegateways.modelplane.ai"},
            }
        )
    if live is not None:
        control.seed(live)
    return control


def live(*, ours: bool = True, status: dict[str, Any] | None = None, version: str = "40.2.0") -> dict[str, Any]:
    return {
        "apiVersion": MP,
        "kind": "InferenceGateway",
        "metadata": {"name": "default", "labels": dict(MANAGED) if ours else {}},
        "spec": {"backend": "Traefik", "traefik": {"version": version}},
        "status": copy.deepcopy(READY if status is None else status),
    }


def run(control: FakeControl, *, check: bool = False, **overrides: Any) -> tuple[dict[str, Any], FakeModule]:
    params = {name: spec.get("default") for name, spec in argument_spec().items()}
    params.update(kubeconfig="/cp.kubeconfig", wait_timeout=30)
    params.update(overrides)
    module = FakeModule(params, check=check)
    clock = Clock()
    result = gateway.run_modelplane_gateway(module, lambda _p, _w: control, clock=clock, sleep=clock.sleep)
    return result, module


def test_a_control_plane_without_the_gateway_api_is_named() -> None:
    with pytest.raises(NotFoundError) as caught:
        run(control_plane(crd=False))
    assert "inferencegateways.modelplane.ai" in caught.value.msg


@pytest.mark.parametrize("check", [False, True])
def test_a_missing_unmanaged_gateway_fails_naming_it(check: bool) -> None:
    control = control_plane()
    with pytest.raises(NotFoundError) as caught:
        run(control, check=check, wait=False)
    assert "InferenceGateway 'default' not found" in caught.value.msg
    assert "modelplane_gateway_manage: true" in caught.value.msg
    assert control.writes == []


def test_an_unready_unmanaged_gateway_fails_at_once_without_wait() -> None:
    control = control_plane(live(ours=False, status={"conditions": [{"type": "Ready", "status": "False"}]}))
    with pytest.raises(NotFoundError) as caught:
        run(control, wait=False, check=True)
    assert "is not Ready" in caught.value.msg
    assert "status.address is empty" in caught.value.msg


def test_an_unready_gateway_times_out_saying_what_it_lacks() -> None:
    control = control_plane(live(ours=False, status={}))
    with pytest.raises(WaitTimeout) as caught:
        run(control)
    assert "condition Ready not reported yet" in caught.value.msg


def test_managed_preflight_in_check_mode_plans_the_create() -> None:
    control = control_plane()
    result, _module = run(control, manage=True, wait=False, check=True)
    assert result["actions"] == ["create InferenceGateway default"]
    assert result["gateway"]["exists"] is False
    assert control.writes == []


def test_managed_gateway_is_created_once_then_left_alone() -> None:
    control = control_plane()
    first, _module = run(control, manage=True, wait=False)
    assert first["changed"] is True
    assert control.writes == [("create", "InferenceGateway", "default")]
    assert schema_errors("inferencegateways", control.created[0]) == []
    control.objects[KEY]["status"] = copy.deepcopy(READY)  # Traefik came up
    second, _module = run(control, manage=True)
    assert second["changed"] is False
    assert second["gateway"] == {
        "name": "default",
        "exists": True,
        "ready": True,
        "address": "203.0.113.10",
        "managed": True,
        "backend": "Traefik",
        "unmet": [],
    }
    assert len(control.writes) == 1


def test_our_gateway_is_updated_a_foreign_one_never() -> None:
    control = control_plane(live(version="39.0.0"))
    result, _module = run(control, manage=True)
    assert result["actions"] == ["update InferenceGateway default"]
    assert control.objects[KEY]["spec"]["traefik"]["version"] == "40.2.0"
    foreign = control_plane(live(ours=False, version="39.0.0"))
    result, _module = run(foreign, manage=True)
    assert result["changed"] is False
    assert result["gateway"]["managed"] is False
    assert foreign.writes == []


def test_absent_deletes_only_our_gateway() -> None:
    ours = control_plane(live())
    result, _module = run(ours, state="absent")
    assert result["actions"] == ["delete InferenceGateway default"]
    assert KEY not in ours.objects
    theirs = control_plane(live(ours=False))
    result, module = run(theirs, state="absent")
    assert result["changed"] is False
    assert theirs.writes == []
    assert "left in place" in module.warnings[0]
