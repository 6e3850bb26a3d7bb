"""lab.modelplane.crds: CRDs generated from Modelplane's XRDs as Crossplane does, and the fallback's contract.

Why: the lab's control plane is only a useful test target if its CRDs are the ones a real Modelplane
control plane serves. They are generated from the reference XRDs when ``../shared`` is there; the
hand-written fallback (for machines without it) must never contradict them, so every node it declares
is compared with the generated schema here. Tests that need the reference skip through
``lab.common.reference.require`` (failures with ``METALPLANE_REQUIRE_REFERENCE=1``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.common.reference import require
from lab.kube import structural as kube_structural
from lab.modelplane.crds import (
    CATEGORY_COMPOSITE,
    CRDS,
    FALLBACK,
    FALLBACK_XRDS,
    KINDS,
    PLURALS,
    SOURCE_ANNOTATION,
    SOURCES,
    XRD_DIR,
    crd_for_xrd,
    fallback_crds,
    load_xrd,
    select_crds,
)

Obj = dict[str, Any]
_STR: Obj = {"type": "string"}

# What a declared node must state exactly as the XRD does: what validation and defaulting act on.
COMPARED_KEYWORDS = (
    "type",
    "required",
    "enum",
    "default",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
)


def differences(fallback: Obj, reference: Obj, path: str = "") -> list[str]:
    """Every way a node the fallback declares differs from the reference (empty: it agrees). The
    fallback may leave a node out (preserving unknown fields instead), never contradict one."""
    where = path or "<root>"
    found: list[str] = []
    for key in COMPARED_KEYWORDS:
        mine, theirs = fallback.get(key), reference.get(key)
        if key == "required":
            mine, theirs = sorted(mine or []), sorted(theirs or [])
        if mine != theirs:
            found.append(f"{where}: {key} is {mine!r} in the fallback, {theirs!r} in the XRD")
    reference_props = reference.get("properties") or {}
    for name, sub in (fallback.get("properties") or {}).items():
        if name not in reference_props:
            found.append(f"{path}.{name}: declared by the fallback, not in the XRD")
        else:
            found += differences(sub, reference_props[name], f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", ".*")):
        if isinstance(fallback.get(key), dict):
            if isinstance(reference.get(key), dict):
                found += differences(fallback[key], reference[key], path + suffix)
            else:
                found.append(f"{where}: {key} declared by the fallback, not in the XRD")
    return found


def schema(crd: Obj) -> Obj:
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def reference_crd(kind: str) -> Obj:
    path = require(XRD_DIR / f"{PLURALS[kind]}.yaml", f"Modelplane XRD {PLURALS[kind]}")
    return crd_for_xrd(load_xrd(path), source=str(path))


def fallback_crd(kind: str) -> Obj:
    return crd_for_xrd(FALLBACK_XRDS[kind], source=FALLBACK)


def node(root: Obj, *path: str) -> Obj:
    for part in path:
        root = root["items"] if part == "[]" else root["properties"][part]
    return root


# --- the fallback agrees with the XRDs ----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_fallback_declares_what_the_xrd_declares(kind: str) -> None:
    assert differences(schema(fallback_crd(kind)), schema(reference_crd(kind))) == []


@pytest.mark.parametrize("kind", KINDS)
def test_fallback_names_scope_and_columns_match_the_xrd(kind: str) -> None:
    mine, theirs = fallback_crd(kind), reference_crd(kind)
    for key in ("group", "names", "scope"):
        assert mine["spec"][key] == theirs["spec"][key], key
    (mine_version,), (their_version,) = mine["spec"]["versions"], theirs["spec"]["versions"]
    for key in ("name", "served", "storage", "subresources", "additionalPrinterColumns"):
        assert mine_version[key] == their_version[key], key


@pytest.mark.parametrize(
    ("path", "mutate", "needle"),
    [
        (("spec", "devices"), lambda n: n.update(maxItems=17), ".spec.devices: maxItems is 17"),
        (("spec", "devices", "[]", "claim"), lambda n: n.update(enum=["DRA"]), ".spec.devices[].claim: enum"),
        (("spec", "devices", "[]"), lambda n: n.update(required=["name"]), ".spec.devices[]: required"),
        (("spec", "devices", "[]", "count"), lambda n: n.update(default=2), ".spec.devices[].count: default"),
        (("spec", "devices", "[]", "name"), lambda n: n.pop("maxLength"), ".spec.devices[].name: maxLength"),
        (("spec",), lambda n: n["properties"].update(colour={"type": "string"}), ".spec.colour: declared"),
        (("spec", "devices", "[]", "driver"), lambda n: n.update(pattern="^x$"), ".spec.devices[].driver: pattern"),
    ],
)
def test_the_comparison_catches_drift(path: tuple[str, ...], mutate: Any, needle: str) -> None:
    """The agreement test can fail: a changed bound, enum, required list, default or field is reported."""
    drifted = copy.deepcopy(schema(fallback_crd("InferenceClass")))
    mutate(node(drifted, *path))
    found = differences(drifted, schema(reference_crd("InferenceClass")))
    assert len(found) == 1
    assert found[0].startswith(needle), found


# --- the lab serves the XRD-derived CRDs when the reference exists --------------------------------


def test_the_lab_serves_the_reference_xrds() -> None:
    for kind in KINDS:
        require(XRD_DIR / f"{PLURALS[kind]}.yaml", f"Modelplane XRD {PLURALS[kind]}")
    assert {kind: str(XRD_DIR / f"{plural}.yaml") for kind, plural in PLURALS.items()} == SOURCES
    assert tuple(reference_crd(kind) for kind in KINDS) == CRDS
    for crd in CRDS:
        assert crd["metadata"]["annotations"][SOURCE_ANNOTATION] != FALLBACK
    # A constraint only the XRD states is served: the fallback leaves provider blocks open.
    region = node(schema(CRDS[KINDS.index("InferenceCluster")]), "spec", "cluster", "vultr", "region")
    assert region["maxLength"] == 32


def test_without_the_reference_every_kind_falls_back() -> None:
    crds, sources = select_crds(None)
    assert sources == dict.fromkeys(KINDS, FALLBACK)
    assert crds == fallback_crds()


def test_fallback_per_kind_when_only_some_files_exist(tmp_path: Path) -> None:
    """One XRD file present: that kind comes from it, the others from the fallback."""
    xrd = copy.deepcopy(FALLBACK_XRDS["InferenceClass"])
    xrd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["description"] = "from the file"
    (tmp_path / "inferenceclasses.yaml").write_text(yaml.safe_dump(xrd))
    crds, sources = select_crds(tmp_path)
    assert sources == {
        **dict.fromkeys(KINDS, FALLBACK),
        "InferenceClass": str(tmp_path / "inferenceclasses.yaml"),
    }
    assert schema(crds[0])["properties"]["spec"]["description"] == "from the file"
    assert crds[1:] == fallback_crds()[1:]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}, "not a Crossplane"),
        (FALLBACK_XRDS["InferenceCluster"], "serves ('modelplane.ai', 'InferenceCluster', 'inferenceclusters')"),
        (["a", "list"], "not a YAML mapping"),
    ],
)
def test_a_reference_file_that_is_not_the_kinds_xrd_is_an_error(tmp_path: Path, content: Any, needle: str) -> None:
    """Present but wrong is loud, never a silent fallback."""
    (tmp_path / "inferenceclasses.yaml").write_text(yaml.safe_dump(content))
    with pytest.raises(ValueError, match=r"inferenceclasses\.yaml") as caught:
        select_crds(tmp_path)
    assert needle in str(caught.value)


@pytest.mark.parametrize("source", ["reference", "fallback"])
def test_every_crd_is_structural(source: str) -> None:
    """The kube emulator (and a real apiserver) accepts them: the Crossplane additions included."""
    crds = tuple(reference_crd(kind) for kind in KINDS) if source == "reference" else fallback_crds()
    for crd in crds:
        assert kube_structural.crd_errors(crd["spec"]) == [], crd["metadata"]["name"]


# --- what Crossplane adds ----------------------------------------------------------------------


def tiny_xrd(api_version: str = "apiextensions.crossplane.io/v2", **spec: Any) -> Obj:
    version = {
        "name": "v1",
        "served": True,
        "referenceable": True,
        "additionalPrinterColumns": [{"name": "SIZE", "type": "integer", "jsonPath": ".spec.size"}],
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "description": "A widget.",
                "required": ["spec", "status"],  # Crossplane keeps only its own root required: [spec]
                "properties": {
                    "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}}},
                    "extra": {"type": "string"},  # only spec and status are taken from the XRD root
                    "spec": {"type": "object", "required": ["size"], "properties": {"size": {"type": "integer"}}},
                    "status": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,  # dropped by Crossplane
                        "properties": {"conditions": {"type": "array", "items": {"type": "object"}}, "phase": _STR},
                    },
                },
            }
        },
    }
    return {
        "apiVersion": api_version,
        "kind": "CompositeResourceDefinition",
        "metadata": {"name": "widgets.example.org", "labels": {"team": "a"}},
        "spec": {
            "group": "example.org",
            "names": {"kind": "Widget", "plural": "widgets", "categories": ["shop"]},
            "versions": [version],
            **spec,
        },
    }


@pytest.mark.parametrize(
    ("api_version", "scope", "crd_scope", "machinery_at", "ref_namespace", "status_extra"),
    [
        ("apiextensions.crossplane.io/v2", "Cluster", "Cluster", ("crossplane",), True, {"crossplane"}),
        ("apiextensions.crossplane.io/v2", "Namespaced", "Namespaced", ("crossplane",), False, {"crossplane"}),
        ("apiextensions.crossplane.io/v2", None, "Namespaced", ("crossplane",), False, {"crossplane"}),
        ("apiextensions.crossplane.io/v1", None, "Cluster", (), True, {"connectionDetails", "claimConditionTypes"}),
    ],
)
def test_crd_for_xrd_adds_what_crossplane_adds(  # noqa: PLR0917
    api_version: str,
    scope: str | None,
    crd_scope: str,
    machinery_at: tuple[str, ...],
    ref_namespace: bool,
    status_extra: set[str],
) -> None:
    crd = crd_for_xrd(tiny_xrd(api_version, **({"scope": scope} if scope else {})), source="test")
    assert crd["metadata"]["name"] == "widgets.example.org"
    assert crd["metadata"]["labels"]["team"] == "a"
    assert crd["metadata"]["annotations"][SOURCE_ANNOTATION] == "test"
    assert crd["spec"]["scope"] == crd_scope
    assert crd["spec"]["names"]["categories"] == ["shop", CATEGORY_COMPOSITE]
    (version,) = crd["spec"]["versions"]
    assert (version["served"], version["storage"], version["subresources"]) == (True, True, {"status": {}})
    root = version["schema"]["openAPIV3Schema"]
    assert root["required"] == ["spec"]
    assert root["description"] == "A widget."
    assert set(root["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert root["properties"]["metadata"] == {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 40}},
    }
    spec = root["properties"]["spec"]
    assert spec["required"] == ["size"]
    machinery = node(spec, *machinery_at)
    assert {"compositionRef", "compositionSelector", "compositionUpdatePolicy", "resourceRefs"} <= set(
        machinery["properties"]
    )
    assert ("namespace" in machinery["properties"]["resourceRefs"]["items"]["properties"]) is ref_namespace
    assert ("claimRef" in spec["properties"]) is (not machinery_at)
    status = root["properties"]["status"]
    assert "x-kubernetes-preserve-unknown-fields" not in status
    assert set(status["properties"]) == {"conditions", "phase", *status_extra}
    conditions = status["properties"]["conditions"]
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert sorted(conditions["items"]["required"]) == ["lastTransitionTime", "reason", "status", "type"]
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns == ["SIZE", "SYNCED", "READY", "COMPOSITION", "COMPOSITIONREVISION", "AGE"]
    composition = version["additionalPrinterColumns"][3]["jsonPath"]
    assert composition == ".spec." + "".join(f"{p}." for p in machinery_at) + "compositionRef.name"
    assert kube_structural.crd_errors(crd["spec"]) == []


def test_crd_for_xrd_caps_the_name_and_copies_scale_and_update_policy() -> None:
    xrd = tiny_xrd(scope="Namespaced", defaultCompositionUpdatePolicy="Manual")
    version = xrd["spec"]["versions"][0]
    del version["schema"]["openAPIV3Schema"]["properties"]["metadata"]
    version["subresources"] = {"scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}}
    (crd_version,) = crd_for_xrd(xrd, source="test")["spec"]["versions"]
    root = crd_version["schema"]["openAPIV3Schema"]
    assert root["properties"]["metadata"]["properties"]["name"]["maxLength"] == 63
    assert crd_version["subresources"] == {"status": {}, **version["subresources"]}
    policy = node(root, "spec", "crossplane", "compositionUpdatePolicy")
    assert policy == {"type": "string", "enum": ["Automatic", "Manual"], "default": "Manual"}


def test_the_xrds_conditions_schema_is_replaced_by_crossplanes() -> None:
    """The XRDs say ``conditions: {type: array, items: {type: object}}``; the served CRD has Crossplane's."""
    xrd = load_xrd(require(XRD_DIR / "inferenceclasses.yaml", "Modelplane XRD inferenceclasses"))
    declared = node(xrd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "status", "conditions")
    served = node(schema(reference_crd("InferenceClass")), "status", "conditions")
    assert declared == {"type": "array", "items": {"type": "object"}}
    assert served["x-kubernetes-list-type"] == "map"
    assert "reason" in served["items"]["required"]
