"""CustomResourceDefinitions: establishment, discovery (and its lag), schema validation, subresources."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubeconf_support import KubeTarget, dra_stand_in_crds, eventually, thing_crd, wait_deleted
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError


def widget_crd(group: str, scope: str = "Namespaced", kind: str = "Widget", plural: str = "widgets") -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                    "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["size"],
            },
            "status": {
                "type": "object",
                "properties": {
                    "conditions": {
                        "type": "array",
                        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    }
                },
            },
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def established(ext: client.ApiextensionsV1Api, name: str) -> bool:
    crd = ext.read_custom_resource_definition(name)
    return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))


def served(target: KubeTarget, group: str, plural: str) -> bool:
    code, body = target.raw("GET", f"/apis/{group}/v1")
    return code == 200 and plural in {r["name"] for r in body.get("resources", [])}


@pytest.fixture
def widgets(kube_target: KubeTarget) -> Iterator[str]:
    """A namespaced Widget CRD in a unique group; established and discoverable."""
    group = f"kc{uuid.uuid4().hex[:6]}.example.com"
    ext = client.ApiextensionsV1Api(kube_target.api_client())
    ext.create_custom_resource_definition(widget_crd(group))
    eventually(lambda: established(ext, f"widgets.{group}"), what="CRD Established")
    eventually(lambda: served(kube_target, group, "widgets"), what="CRD in discovery")
    yield group
    ext.delete_custom_resource_definition(f"widgets.{group}")


def custom(target: KubeTarget) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(target.api_client())


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def _create(target: KubeTarget, group: str, ns: str, name: str, **spec: Any) -> dict[str, Any]:
    body = widget(name, **spec)
    body["apiVersion"] = f"{group}/v1"
    return custom(target).create_namespaced_custom_object(group, "v1", ns, "widgets", body)


def test_crd_becomes_established_and_discoverable(kube_target: KubeTarget, widgets: str) -> None:
    dyn = kube_target.dynamic()
    resource = dyn.resources.get(api_version=f"{widgets}/v1", kind="Widget")
    assert resource.namespaced is True
    _code, groups = kube_target.raw("GET", "/apis")
    assert widgets in {g["name"] for g in groups["groups"]}


def test_cluster_scoped_crd(kube_target: KubeTarget) -> None:
    group = f"kc{uuid.uuid4().hex[:6]}.example.com"
    ext = client.ApiextensionsV1Api(kube_target.api_client())
    ext.create_custom_resource_definition(widget_crd(group, "Cluster", "Gadget", "gadgets"))
    try:
        eventually(lambda: established(ext, f"gadgets.{group}"))
        eventually(lambda: served(kube_target, group, "gadgets"))
        api = custom(kube_target)
        body = {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"size": 2}}
        api.create_cluster_custom_object(group, "v1", "gadgets", body)
        assert api.get_cluster_custom_object(group, "v1", "gadgets", "g1")["spec"]["size"] == 2
    finally:
        ext.delete_custom_resource_definition(f"gadgets.{group}")


def test_custom_resource_crud_defaults_and_pruning(kube_target: KubeTarget, widgets: str, ns: str) -> None:
    made = _create(kube_target, widgets, ns, "w1", size=3, unknown="dropped")
    assert made["spec"] == {"size": 3, "color": "red"}
    assert made["metadata"]["generation"] == 1
    api = custom(kube_target)
    patched = api.patch_namespaced_custom_object(widgets, "v1", ns, "widgets", "w1", {"spec": {"size": 4}})
    assert patched["spec"]["size"] == 4
    assert patched["metadata"]["generation"] == 2
    listed = api.list_namespaced_custom_object(widgets, "v1", ns, "widgets")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w1"]
    api.delete_namespaced_custom_object(widgets, "v1", ns, "widgets", "w1")
    wait_deleted(lambda: api.get_namespaced_custom_object(widgets, "v1", ns, "widgets", "w1"))


@pytest.mark.parametrize(
    "spec",
    [{"size": "big"}, {"size": 11}, {"color": "green", "size": 1}, {}, {"size": 1, "tags": "not-a-list"}],
    ids=["wrong-type", "maximum", "enum", "required", "array"],
)
def test_schema_violations_are_422(kube_target: KubeTarget, widgets: str, ns: str, spec: dict[str, Any]) -> None:
    with pytest.raises(ApiException) as info:
        _create(kube_target, widgets, ns, "bad", **spec)
    assert info.value.status == 422


def test_strategic_merge_on_custom_resources_is_415(kube_target: KubeTarget, widgets: str, ns: str) -> None:
    _create(kube_target, widgets, ns, "w2", size=1)
    path = f"/apis/{widgets}/v1/namespaces/{ns}/widgets/w2"
    code, _body = kube_target.raw(
        "PATCH", path, {"spec": {"size": 2}}, {"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert code == 415
    code, body = kube_target.raw("PATCH", path, {"spec": {"size": 2}}, {"Content-Type": "application/merge-patch+json"})
    assert code == 200
    assert body["spec"]["size"] == 2


def test_replace_of_a_custom_resource_needs_a_resource_version(kube_target: KubeTarget, widgets: str, ns: str) -> None:
    made = _create(kube_target, widgets, ns, "w3", size=1)
    made["metadata"].pop("resourceVersion")
    with pytest.raises(ApiException) as info:
        custom(kube_target).replace_namespaced_custom_object(widgets, "v1", ns, "widgets", "w3", made)
    assert info.value.status == 422


def test_custom_resource_status_subresource(kube_target: KubeTarget, widgets: str, ns: str) -> None:
    _create(kube_target, widgets, ns, "w4", size=1)
    api = custom(kube_target)
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    main = api.patch_namespaced_custom_object(widgets, "v1", ns, "widgets", "w4", ready)
    assert "status" not in main or not main["status"].get("conditions")
    status = api.patch_namespaced_custom_object_status(widgets, "v1", ns, "widgets", "w4", ready)
    assert status["status"]["conditions"][0]["type"] == "Ready"
    assert status["metadata"]["generation"] == 1


def test_unknown_group_is_404(kube_target: KubeTarget, ns: str) -> None:
    code, _body = kube_target.raw("GET", f"/apis/nothing.example.com/v1/namespaces/{ns}/things")
    assert code == 404


def test_crd_name_must_be_plural_dot_group(kube_target: KubeTarget) -> None:
    crd = widget_crd("kcname.example.com")
    crd["metadata"]["name"] = "wrong.kcname.example.com"
    with pytest.raises(ApiException) as info:
        client.ApiextensionsV1Api(kube_target.api_client()).create_custom_resource_definition(crd)
    assert info.value.status == 422


# --- structural schemas (apiextensions.k8s.io/v1) ------------------------------------------------

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ROOT = "spec.validation.openAPIV3Schema"  # where the apiserver reports a schema shared by every version
TYPES = '"array", "boolean", "integer", "number", "object", "string"'
OBJ: dict[str, Any] = {"type": "object"}


def unserved(crd: dict[str, Any], index: int) -> dict[str, Any]:
    crd["spec"]["versions"][index]["served"] = False
    return crd


def with_spec(spec_schema: dict[str, Any], **root: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": spec_schema}, **root}


# (id, CRD, [(field, reason, message)]): what kube-apiserver answers, checked on the real 1.20 lane.
NON_STRUCTURAL: list[tuple[str, dict[str, Any], list[tuple[str, str, str]]]] = [
    (
        "version-without-schema",
        thing_crd(None),
        [("spec.versions[0].schema.openAPIV3Schema", "FieldValueRequired", "Required value: schemas are required")],
    ),
    (
        "unserved-version-without-schema",
        unserved(thing_crd(OBJ, None), 1),
        [("spec.versions[1].schema.openAPIV3Schema", "FieldValueRequired", "Required value: schemas are required")],
    ),
    (
        "property-without-type",
        thing_crd(with_spec({"properties": {"a": {"type": "string"}}})),
        [
            (
                f"{ROOT}.properties[spec].type",
                "FieldValueRequired",
                "Required value: must not be empty for specified object fields",
            )
        ],
    ),
    (
        "root-without-type",
        thing_crd({"properties": {"spec": OBJ}}),
        [(f"{ROOT}.type", "FieldValueRequired", "Required value: must not be empty at the root")],
    ),
    (
        "root-not-object",
        thing_crd({"type": "string"}),
        [(f"{ROOT}.type", "FieldValueInvalid", 'Invalid value: "string": must be object at the root')],
    ),
    (
        "unknown-type",
        thing_crd(with_spec({"type": "objekt"})),
        [
            (
                f"{ROOT}.properties[spec].type",
                "FieldValueNotSupported",
                f'Unsupported value: "objekt": supported values: {TYPES}',
            )
        ],
    ),
    (
        "array-without-items",
        thing_crd(with_spec({"type": "array"})),
        [(f"{ROOT}.properties[spec].items", "FieldValueRequired", "Required value: must be specified")],
    ),
    (
        "array-item-without-type",
        thing_crd(with_spec({"type": "array", "items": {"properties": {}}})),
        [
            (
                f"{ROOT}.properties[spec].items.type",
                "FieldValueRequired",
                "Required value: must not be empty for specified array items",
            )
        ],
    ),
    (
        "map-value-without-type",
        thing_crd(with_spec({"type": "object", "additionalProperties": {}})),
        [
            (
                f"{ROOT}.properties[spec].additionalProperties.type",
                "FieldValueRequired",
                "Required value: must not be empty for specified object fields",
            )
        ],
    ),
    (
        "additional-properties-with-properties",
        thing_crd(
            with_spec(
                {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "additionalProperties": {"type": "string"},
                }
            )
        ),
        [
            (
                f"{ROOT}.properties[spec].additionalProperties",
                "FieldValueForbidden",
                "Forbidden: additionalProperties and properties are mutual exclusive",
            )
        ],
    ),
    (
        "metadata-beyond-name",
        thing_crd({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": OBJ}}}}),
        [
            (
                f"{ROOT}.properties[metadata]",
                "FieldValueForbidden",
                "Forbidden: must not specify anything other than name and generateName, but metadata is "
                "implicitly specified",
            )
        ],
    ),
    (
        "metadata-not-object",
        thing_crd({"type": "object", "properties": {"metadata": {"type": "string"}}}),
        [(f"{ROOT}.properties[metadata].type", "FieldValueInvalid", 'Invalid value: "string": must be object')],
    ),
    (
        "type-inside-anyOf",
        thing_crd(with_spec({"type": "object", "anyOf": [{"type": "string"}]})),
        [
            (
                f"{ROOT}.properties[spec].anyOf[0].type",
                "FieldValueForbidden",
                "Forbidden: must be empty to be structural",
            )
        ],
    ),
    (
        "ref",
        thing_crd(with_spec({"$ref": "#/definitions/x"})),
        [(f"{ROOT}.properties[spec].$ref", "FieldValueForbidden", "Forbidden: $ref is not supported")],
    ),
    (
        "preserve-unknown-fields-false",
        thing_crd(with_spec({"type": "object", "x-kubernetes-preserve-unknown-fields": False})),
        [
            (
                f"{ROOT}.properties[spec].x-kubernetes-preserve-unknown-fields",
                "FieldValueInvalid",
                "Invalid value: false: must be true or undefined",
            )
        ],
    ),
    (
        "per-version-schemas",
        thing_crd(with_spec(OBJ), with_spec({"properties": {}})),
        [
            (
                "spec.versions[1].schema.openAPIV3Schema.properties[spec].type",
                "FieldValueRequired",
                "Required value: must not be empty for specified object fields",
            )
        ],
    ),
    (
        "two-errors",
        thing_crd({"type": "object", "properties": {"spec": {"type": "objekt"}, "status": {"type": "array"}}}),
        [
            (
                f"{ROOT}.properties[spec].type",
                "FieldValueNotSupported",
                f'Unsupported value: "objekt": supported values: {TYPES}',
            ),
            (f"{ROOT}.properties[status].items", "FieldValueRequired", "Required value: must be specified"),
        ],
    ),
]


@pytest.mark.parametrize(("crd", "expected"), [c[1:] for c in NON_STRUCTURAL], ids=[c[0] for c in NON_STRUCTURAL])
def test_non_structural_v1_crds_are_422(
    kube_target: KubeTarget, crd: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    name = crd["metadata"]["name"]
    code, body = kube_target.raw("POST", CRDS, crd)
    if code == 201:
        kube_target.raw("DELETE", f"{CRDS}/{name}")
    assert code == 422, body
    assert (body["kind"], body["status"], body["reason"], body["code"]) == ("Status", "Failure", "Invalid", 422)
    details = body["details"]
    assert (details["name"], details["group"], details["kind"]) == (
        name,
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
    )
    got = sorted((c["field"], c["reason"], c["message"]) for c in details["causes"])
    assert got == sorted(expected)
    text = ", ".join(f"{field}: {message}" for field, _reason, message in expected)
    text = f"[{text}]" if len(expected) > 1 else text
    assert body["message"] == f'CustomResourceDefinition.apiextensions.k8s.io "{name}" is invalid: {text}'
    assert kube_target.raw("GET", f"{CRDS}/{name}")[0] == 404


# Structural schemas the rules allow: a type may be left out under x-kubernetes-int-or-string or
# x-kubernetes-preserve-unknown-fields, metadata may restrict name/generateName.
STRUCTURAL: list[tuple[str, dict[str, Any]]] = [
    (
        "int-or-string-without-type",
        with_spec({"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": True}}}),
    ),
    (
        "int-or-string-spelled-out",
        with_spec(
            {
                "type": "object",
                "properties": {
                    "port": {
                        "x-kubernetes-int-or-string": True,
                        "anyOf": [{"type": "integer"}, {"type": "string"}],
                    }
                },
            }
        ),
    ),
    ("preserve-unknown-fields-without-type", with_spec({"x-kubernetes-preserve-unknown-fields": True})),
    ("root-preserve-unknown-fields", {"x-kubernetes-preserve-unknown-fields": True}),
    (
        "metadata-name-and-generate-name",
        {
            "type": "object",
            "properties": {
                "metadata": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "maxLength": 20}, "generateName": {"type": "string"}},
                }
            },
        },
    ),
    (
        "value-validations-in-anyOf",
        with_spec({"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"required": ["a"]}]}),
    ),
    (
        "nullable-map-and-embedded-object",
        with_spec(
            {
                "type": "object",
                "nullable": True,
                "properties": {
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "template": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "x-kubernetes-preserve-unknown-fields": True,
                    },
                },
            }
        ),
    ),
]


@pytest.mark.parametrize("schema", [c[1] for c in STRUCTURAL], ids=[c[0] for c in STRUCTURAL])
def test_structural_v1_crds_are_accepted(kube_target: KubeTarget, schema: dict[str, Any]) -> None:
    crd = thing_crd(schema)
    code, body = kube_target.raw("POST", CRDS, crd)
    assert code == 201, body
    kube_target.raw("DELETE", f"{CRDS}/{crd['metadata']['name']}")


def test_an_update_that_makes_a_crd_non_structural_is_422(kube_target: KubeTarget) -> None:
    crd = thing_crd(with_spec({"type": "object", "properties": {"a": {"type": "string"}}}))
    name = crd["metadata"]["name"]
    assert kube_target.raw("POST", CRDS, crd)[0] == 201
    try:
        patch = [{"op": "remove", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/type"}]
        code, body = kube_target.raw("PATCH", f"{CRDS}/{name}", patch, {"Content-Type": "application/json-patch+json"})
        assert code == 422, body
        assert [c["field"] for c in body["details"]["causes"]] == [f"{ROOT}.properties[spec].type"]
        _code, stored = kube_target.raw("GET", f"{CRDS}/{name}")
        assert stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"] == "object"
    finally:
        kube_target.raw("DELETE", f"{CRDS}/{name}")


def test_deleting_a_crd_removes_its_api_and_objects(kube_target: KubeTarget, ns: str) -> None:
    group = f"kc{uuid.uuid4().hex[:6]}.example.com"
    ext = client.ApiextensionsV1Api(kube_target.api_client())
    ext.create_custom_resource_definition(widget_crd(group))
    eventually(lambda: established(ext, f"widgets.{group}"))
    eventually(lambda: served(kube_target, group, "widgets"))
    _create(kube_target, group, ns, "doomed", size=1)
    ext.delete_custom_resource_definition(f"widgets.{group}")
    wait_deleted(lambda: ext.read_custom_resource_definition(f"widgets.{group}"), what="CRD to be removed")

    def api_gone() -> bool:
        code, _body = kube_target.raw("GET", f"/apis/{group}/v1/namespaces/{ns}/widgets")
        return code == 404

    eventually(api_gone, what="custom resource API to disappear")


def test_dynamic_client_finds_a_new_crd_after_cache_invalidation(kube_target: KubeTarget) -> None:
    dyn = kube_target.dynamic()
    group = f"kc{uuid.uuid4().hex[:6]}.example.com"
    dyn.resources.get(api_version="v1", kind="ConfigMap")  # fill the discovery cache first
    ext = client.ApiextensionsV1Api(kube_target.api_client())
    ext.create_custom_resource_definition(widget_crd(group))
    try:
        eventually(lambda: established(ext, f"widgets.{group}"))

        def found() -> Any:
            try:
                dyn.resources.invalidate_cache()
                return dyn.resources.get(api_version=f"{group}/v1", kind="Widget")
            except ResourceNotFoundError:
                return None

        assert eventually(found, what="Widget in discovery").kind == "Widget"
    finally:
        ext.delete_custom_resource_definition(f"widgets.{group}")


@pytest.mark.emulator_only
def test_emulator_models_the_crd_discovery_lag() -> None:
    """A real server lists a new CRD ~0.5 s after Established; the emulator (delay_scale=1) too."""
    from lab.kube.server import KubeEmulator

    with KubeEmulator(delay_scale=1.0, name="lag") as emulator:
        emulator.create(widget_crd("lag.example.com"))
        crd = eventually(
            lambda: (
                (emulator.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.lag.example.com") or {})
                .get("status", {})
                .get("conditions")
            )
        )
        assert {c["type"] for c in crd} >= {"Established"}
        target = KubeTarget("emulator", emulator.kubeconfig_path, emulator)
        # One observation of discovery per poll: until it lists the kind (at most 50 polls), then 3 more.
        seen: list[bool] = []
        while len(seen) < 50 and not any(seen):
            seen.append(served(target, "lag.example.com", "widgets"))
            time.sleep(0.1)
        seen += [served(target, "lag.example.com", "widgets") for _poll in range(3)]
        target.close()
        # Absent right after Established, listed within the bound, and never absent again once listed.
        assert seen[0] is False
        assert True in seen, f"the CRD was not in discovery after {len(seen)} polls"
        first = seen.index(True)
        assert all(seen[first:])


@pytest.mark.emulator_only
def test_dra_stand_in_crds_serve_resource_slices_with_field_selectors(kube_target: KubeTarget) -> None:
    """The stand-ins the real 1.20 lane installs, exercised here under a private group."""
    from kubeconf_support import install_dra_stand_ins

    group = f"kcdra{uuid.uuid4().hex[:4]}.example.com"
    assert install_dra_stand_ins(kube_target, group=group) is True
    assert install_dra_stand_ins(kube_target, group=group) is False  # already served: no-op
    assert {c["metadata"]["name"] for c in dra_stand_in_crds(group)} == {
        f"resourceslices.{group}",
        f"deviceclasses.{group}",
    }
    api = custom(kube_target)
    for node, driver in (("n1", "gpu.nvidia.com"), ("n2", "other.example.com")):
        body = {
            "apiVersion": f"{group}/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-slice"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [],
            },
        }
        api.create_cluster_custom_object(group, "v1", "resourceslices", body)
    found = api.list_cluster_custom_object(group, "v1", "resourceslices", field_selector="spec.driver=gpu.nvidia.com")
    assert [i["metadata"]["name"] for i in found["items"]] == ["n1-slice"]
