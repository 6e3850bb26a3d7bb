"""JMESPath readiness: the default expression, strict ``true``, empty matches, diagnostics."""

from __future__ import annotations

import pytest
from kube_fakes import obj

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._kube import readiness


@pytest.mark.parametrize(
    ("body", "ready"),
    [
        (obj("a", ready="True"), True),
        (obj("a", ready="False"), False),
        (obj("a", ready="Unknown"), False),
        (obj("a", ready=None), False),  # no conditions at all
        ({"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Synced", "status": "True"}]}}, False),
        ({"metadata": {"name": "a"}, "status": None}, False),
    ],
)
def test_default_expression(body: dict, ready: bool) -> None:
    compiled = readiness.compile_expression(None)
    assert readiness.evaluate(compiled, body)[0] is ready


@pytest.mark.parametrize(
    ("expression", "body", "ready", "value"),
    [
        (
            "status.readyReplicas == spec.replicas",
            {"spec": {"replicas": 3}, "status": {"readyReplicas": 3}},
            True,
            True,
        ),
        (
            "status.readyReplicas == spec.replicas",
            {"spec": {"replicas": 3}, "status": {"readyReplicas": 1}},
            False,
            False,
        ),
        # A truthy non-boolean is reported but never counts as ready.
        ("status.readyReplicas", {"status": {"readyReplicas": 1}}, False, 1),
        ("status.phase", {"status": {"phase": "Running"}}, False, "Running"),
        ("status.gateway.address != null", {"status": {"gateway": {"address": "10.0.0.1"}}}, True, True),
        ("status.gateway.address != null", {"status": {}}, False, False),
    ],
)
def test_custom_expressions(expression: str, body: dict, ready: bool, value: object) -> None:
    assert readiness.evaluate(readiness.compile_expression(expression), body) == (ready, value)


def test_runtime_type_error_is_a_not_ready_value() -> None:
    ready, value = readiness.evaluate(readiness.compile_expression("length(status.n)"), {"status": {"n": 5}})
    assert ready is False
    assert str(value).startswith("<error:")


def test_bad_expression_names_the_option() -> None:
    with pytest.raises(InputError) as err:
        readiness.compile_expression("status.[[[")
    assert err.value.field == "expression"


def test_assess_needs_at_least_one_object() -> None:
    compiled = readiness.compile_expression(None)
    assert readiness.assess(compiled, [], name=None) == (False, [])


def test_assess_all_must_be_ready_and_name_filters() -> None:
    compiled = readiness.compile_expression(None)
    objects = [obj("b", namespace="ns", ready="False"), obj("a", namespace="ns")]
    ready, entries = readiness.assess(compiled, objects, name=None)
    assert ready is False
    assert [e["name"] for e in entries] == ["a", "b"]
    assert readiness.assess(compiled, objects, name="a")[0] is True
    assert readiness.assess(compiled, objects, name="zzz") == (False, [])


def test_summary_carries_conditions_and_generations() -> None:
    body = obj("a", namespace="ns", ready="False")
    body["metadata"]["generation"] = 4
    body["status"]["observedGeneration"] = 3
    entry = readiness.summarise(readiness.compile_expression(None), body)
    assert entry == {
        "name": "a",
        "namespace": "ns",
        "ready": False,
        "value": False,
        "conditions": [{"type": "Ready", "status": "False", "reason": "RFalse"}],
        "generation": 4,
        "observed_generation": 3,
    }


def test_timeout_message_names_objects_values_and_conditions() -> None:
    compiled = readiness.compile_expression(None)
    body = obj("web", namespace="ml", ready="False")
    body["status"]["conditions"][0]["message"] = "0/3 replicas"
    _ready, entries = readiness.assess(compiled, [body, obj("ok", namespace="ml")], name=None)
    msg = readiness.timeout_message("Deployment (apps/v1)", 5, entries)
    assert msg == (
        "Timed out after 5s waiting for Deployment (apps/v1): 1 of 2 not ready: "
        "ml/web [value=False, Ready=False (RFalse: 0/3 replicas)]"
    )
    assert "no matching object" in readiness.timeout_message("X", 1, [])
