"""The Modelplane CRDs the lab's control plane serves (``modelplane.ai/v1alpha1``), made from the XRDs.

Why: on a real control plane these CRDs are not written by anyone: Crossplane generates each one from
Modelplane's ``CompositeResourceDefinition`` (XRD). The lab does the same, so that what the
collection writes is checked against the platform's own contract, not against our reading of it:

* **Source, per kind**: the XRD ``<plural>.yaml`` in the shared reference tree
  (``../shared/reference/modelplane/xrds/`` next to the checkout, or ``$METALPLANE_REFERENCE_DIR``;
  see ``lab.common.reference``) when that file exists; otherwise the small hand-written XRD below
  (``FALLBACK_XRDS``), so the lab still runs on a machine without the reference tree. A reference
  file that exists but is not a Crossplane XRD is an error, never a silent fallback.
  ``SOURCES`` says which one each kind uses.
* **Generation** (``crd_for_xrd``) follows Crossplane v2's ``internal/xcrd`` (``ForCompositeResource``,
  ``genCrdVersion``, ``schemas.go``): the XRD's ``spec``/``status`` schemas under a fixed root
  (``apiVersion``, ``kind``, ``metadata.name`` at most 63 characters, ``required: [spec]``), the
  Crossplane machinery under ``spec.crossplane`` (``compositionRef``, ``compositionSelector``,
  ``compositionRevisionRef``/``Selector``, ``compositionUpdatePolicy``, ``resourceRefs``) and
  ``status.crossplane``, Crossplane's ``status.conditions`` schema (a list-map keyed by ``type``;
  each entry requires ``type``, ``status``, ``reason``, ``lastTransitionTime``), the status
  subresource, the ``composite`` category and the ``SYNCED``/``READY``/``COMPOSITION``/``AGE``
  printer columns. Legacy (``apiextensions.crossplane.io/v1``, scope ``LegacyCluster``) XRDs get the
  machinery directly under ``spec`` plus ``claimRef``/``writeConnectionSecretToRef``, as Crossplane
  does; claim CRDs are not generated (Modelplane has none).

The hand-written fallback states only what the collection and the simulated controller rely on
(required fields, enums, bounds, the defaults the modules expect) and is permissive elsewhere
(``x-kubernetes-preserve-unknown-fields``). ``tests/unit/lab/test_modelplane_crds.py`` checks every
node it declares against the generated reference schema, so it cannot drift from the XRDs.
The ``x-kubernetes-validations`` (CEL) rules of the XRDs are carried but not evaluated (the kube
emulator has no CEL). Kinds: InferenceClass, InferenceCluster and InferenceGateway (cluster-scoped),
ModelDeployment, ModelService and ModelCache (namespaced, what a user writes to serve a model) and
ModelReplica (namespaced, Modelplane-internal: composed by the simulated scheduler from ModelDeployments,
and created by tests to model replicas pinned to a cluster).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from lab.common.reference import reference_path

Obj = dict[str, Any]
GROUP = "modelplane.ai"
VERSION = "v1alpha1"
# The kinds the lab serves, with the plural that names both the XRD file and the CRD.
PLURALS = {
    "InferenceClass": "inferenceclasses",
    "InferenceCluster": "inferenceclusters",
    "ModelReplica": "modelreplicas",
    "InferenceGateway": "inferencegateways",
    "ModelDeployment": "modeldeployments",
    "ModelService": "modelservices",
    "ModelCache": "modelcaches",
}
XRD_DIR = reference_path("modelplane", "xrds")
FALLBACK = "fallback"  # the SOURCES value of a kind served from FALLBACK_XRDS
# On the lab's CRDs: where the schema came from (a reference file path, or FALLBACK).
SOURCE_ANNOTATION = "lab.metalplane.io/schema-source"
LAB_LABEL = {"app.kubernetes.io/part-of": "modelplane-lab"}

# --- what Crossplane adds (internal/xcrd, Crossplane v2) -------------------------------------------

XRD_GROUP = "apiextensions.crossplane.io"
XRD_KIND = "CompositeResourceDefinition"
# apiextensions.crossplane.io/v2 defaults spec.scope to Namespaced; every v1 XRD is LegacyCluster.
LEGACY_CLUSTER, CLUSTER, NAMESPACED = "LegacyCluster", "Cluster", "Namespaced"
# Crossplane uses the composite's name as a label value, so the generated CRD caps metadata.name.
MAX_COMPOSITE_NAME_LENGTH = 63
CATEGORY_COMPOSITE = "composite"

_STRING: Obj = {"type": "string"}
_MATCH_LABELS: Obj = {
    "type": "object",
    "required": ["matchLabels"],
    "properties": {"matchLabels": {"type": "object", "additionalProperties": _STRING}},
}
_NAME_REF: Obj = {"type": "object", "required": ["name"], "properties": {"name": _STRING}}


def crossplane_spec_props(scope: str, default_update_policy: str | None = None) -> Obj:
    """``CompositeResourceSpecProps``: the spec fields Crossplane adds (under ``spec.crossplane``
    unless the XRD is legacy)."""
    ref_props = {"apiVersion": _STRING, "name": _STRING, "kind": _STRING}
    if scope != NAMESPACED:  # namespaced XRs cannot reference resources in other namespaces
        ref_props["namespace"] = _STRING
    policy: Obj = {"type": "string", "enum": ["Automatic", "Manual"]}
    if default_update_policy:
        policy["default"] = default_update_policy
    props: Obj = {
        "compositionRef": _NAME_REF,
        "compositionSelector": _MATCH_LABELS,
        "compositionRevisionRef": _NAME_REF,
        "compositionRevisionSelector": _MATCH_LABELS,
        "compositionUpdatePolicy": policy,
        "resourceRefs": {
            "type": "array",
            "items": {"type": "object", "required": ["apiVersion", "kind"], "properties": ref_props},
            "x-kubernetes-list-type": "atomic",
        },
    }
    if scope == LEGACY_CLUSTER:
        props["claimRef"] = {
            "type": "object",
            "required": ["apiVersion", "kind", "namespace", "name"],
            "properties": {"apiVersion": _STRING, "kind": _STRING, "namespace": _STRING, "name": _STRING},
        }
        props["writeConnectionSecretToRef"] = {
            "type": "object",
            "required": ["name", "namespace"],
            "properties": {"name": _STRING, "namespace": _STRING},
        }
        return copy.deepcopy(props)
    return copy.deepcopy(
        {
            "crossplane": {
                "type": "object",
                "description": "Configures how Crossplane will reconcile this composite resource",
                "properties": props,
            }
        }
    )


def crossplane_status_props(scope: str) -> Obj:
    """``CompositeResourceStatusProps``: Crossplane's conditions schema (it replaces whatever the XRD
    says about ``status.conditions``) and its bookkeeping fields."""
    published: Obj = {"type": "object", "properties": {"lastPublishedTime": {"type": "string", "format": "date-time"}}}
    props: Obj = {
        "conditions": {
            "description": "Conditions of the resource.",
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "required": ["lastTransitionTime", "reason", "status", "type"],
                "properties": {
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                    "message": _STRING,
                    "reason": _STRING,
                    "status": _STRING,
                    "type": _STRING,
                    "observedGeneration": {"type": "integer", "format": "int64"},
                },
            },
        }
    }
    if scope == LEGACY_CLUSTER:
        props["connectionDetails"] = published
        props["claimConditionTypes"] = {"type": "array", "x-kubernetes-list-type": "set", "items": _STRING}
    else:
        props["crossplane"] = {
            "type": "object",
            "description": "Indicates how Crossplane is reconciling this composite resource",
            "properties": {"connectionDetails": published},
        }
    return copy.deepcopy(props)


def crossplane_printer_columns(scope: str) -> list[Obj]:
    """``CompositeResourcePrinterColumns``, appended after the XRD's own columns."""
    prefix = ".spec." if scope == LEGACY_CLUSTER else ".spec.crossplane."
    return [
        {"name": "SYNCED", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Synced')].status"},
        {"name": "READY", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
        {"name": "COMPOSITION", "type": "string", "jsonPath": prefix + "compositionRef.name"},
        {
            "name": "COMPOSITIONREVISION",
            "type": "string",
            "jsonPath": prefix + "compositionRevisionRef.name",
            "priority": 1,
        },
        {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def xrd_scope(xrd: Obj) -> str:
    """The composite scope Crossplane uses for ``xrd`` (after API defaulting and v1 -> v2 conversion)."""
    if xrd.get("apiVersion") == f"{XRD_GROUP}/v1":
        return LEGACY_CLUSTER
    return str((xrd.get("spec") or {}).get("scope") or NAMESPACED)


def _version_schema(version: Obj) -> Obj:
    """``genCrdVersion``'s schema: Crossplane's base root with the XRD's spec and status merged in. Only
    ``spec`` and ``status`` (and a tighter ``metadata.name.maxLength``) are taken from the XRD root."""
    xrd_root = copy.deepcopy((version.get("schema") or {}).get("openAPIV3Schema"))
    if not isinstance(xrd_root, dict):
        raise ValueError(f"XRD version {version.get('name')!r} has no schema.openAPIV3Schema")
    xrd_props = xrd_root.get("properties") or {}
    name_limit = MAX_COMPOSITE_NAME_LENGTH
    xrd_name = ((xrd_props.get("metadata") or {}).get("properties") or {}).get("name") or {}
    if isinstance(xrd_name.get("maxLength"), int):
        name_limit = min(name_limit, xrd_name["maxLength"])
    root: Obj = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": name_limit}}},
            "spec": {"type": "object", "properties": {}},
            "status": {"type": "object", "properties": {}},
        },
    }
    if xrd_root.get("description"):
        root["description"] = xrd_root["description"]
    xspec, cspec = xrd_props.get("spec") or {}, root["properties"]["spec"]
    cspec["required"] = list(xspec.get("required") or [])
    for key in ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations", "oneOf", "description"):
        if xspec.get(key):
            cspec[key] = xspec[key]
    cspec["properties"].update(xspec.get("properties") or {})
    xstatus, cstatus = xrd_props.get("status") or {}, root["properties"]["status"]
    for key in ("required", "x-kubernetes-validations", "oneOf", "description"):  # not preserve-unknown-fields
        if xstatus.get(key):
            cstatus[key] = xstatus[key]
    cstatus["properties"].update(xstatus.get("properties") or {})
    if not cspec["required"]:
        del cspec["required"]
    return root


def crd_for_xrd(xrd: Obj, *, source: str) -> Obj:
    """The ``apiextensions.k8s.io/v1`` CRD Crossplane generates for composite resource definition ``xrd``
    (``source`` is recorded in an annotation: the reference file, or ``FALLBACK``)."""
    api_version = str(xrd.get("apiVersion", ""))
    if xrd.get("kind") != XRD_KIND or api_version not in (f"{XRD_GROUP}/v1", f"{XRD_GROUP}/v2"):
        raise ValueError(
            f"{source}: not a Crossplane {XRD_KIND} (apiVersion {api_version!r}, kind {xrd.get('kind')!r})"
        )
    spec = xrd["spec"]
    scope = xrd_scope(xrd)
    names = copy.deepcopy(spec["names"])
    names["categories"] = [*(names.get("categories") or []), CATEGORY_COMPOSITE]
    extra_meta = spec.get("metadata") or {}
    labels = {**((xrd.get("metadata") or {}).get("labels") or {}), **(extra_meta.get("labels") or {}), **LAB_LABEL}
    annotations = {**(extra_meta.get("annotations") or {}), SOURCE_ANNOTATION: source}
    versions = []
    for version in spec["versions"]:
        schema = _version_schema(version)
        schema["properties"]["spec"]["properties"].update(
            crossplane_spec_props(scope, spec.get("defaultCompositionUpdatePolicy"))
        )
        schema["properties"]["status"]["properties"].update(crossplane_status_props(scope))
        subresources: Obj = {"status": {}}
        if (version.get("subresources") or {}).get("scale"):  # Crossplane >= 2.3 serves an XRD's scale
            subresources["scale"] = copy.deepcopy(version["subresources"]["scale"])
        crd_version: Obj = {
            "name": version["name"],
            "served": bool(version.get("served")),
            "storage": bool(version.get("referenceable")),
            "schema": {"openAPIV3Schema": schema},
            "subresources": subresources,
            "additionalPrinterColumns": [
                *copy.deepcopy(version.get("additionalPrinterColumns") or []),
                *crossplane_printer_columns(scope),
            ],
        }
        if version.get("deprecated"):
            crd_version["deprecated"] = True
        if version.get("deprecationWarning"):
            crd_version["deprecationWarning"] = version["deprecationWarning"]
        versions.append(crd_version)
    crd_spec: Obj = {
        "group": spec["group"],
        "names": names,
        "scope": "Namespaced" if scope == NAMESPACED else "Cluster",
        "versions": versions,
    }
    if spec.get("conversion"):
        crd_spec["conversion"] = copy.deepcopy(spec["conversion"])
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": xrd["metadata"]["name"], "labels": labels, "annotations": annotations},
        "spec": crd_spec,
    }
    return json.loads(json.dumps(crd))  # as the apiserver stores it: no node shared by two paths


# --- the hand-written fallback XRDs (used only without the reference tree) -------------------------

_PRESERVE: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_NAME: Obj = {"type": "string", "minLength": 1, "maxLength": 253}

# One attribute value sets exactly one of string/version/bool/int (the "exactly one" is CEL upstream).
_ATTRIBUTE: Obj = {
    "type": "object",
    "properties": {
        "string": {"type": "string", "maxLength": 253},
        "version": {"type": "string", "maxLength": 32},
        "bool": {"type": "boolean"},
        "int": {"type": "integer", "format": "int64"},
    },
}
_CAPACITY: Obj = {
    "type": "object",
    "maxProperties": 32,
    "additionalProperties": {
        "type": "object",
        "required": ["value"],
        "properties": {"value": {"type": "string", "minLength": 1, "maxLength": 32}},
    },
}

INFERENCE_CLASS_SPEC: Obj = {
    "type": "object",
    "required": ["devices"],
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "description": {"type": "string"},
        # Provider-specific (GKE/EKS/AKS/Nebius/Vultr); ignored for Existing clusters.
        "provisioning": {
            "type": "object",
            "required": ["provider"],
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"provider": {"type": "string", "enum": ["GKE", "EKS", "AKS", "Nebius", "Vultr"]}},
        },
        "devices": {
            "type": "array",
            "minItems": 1,
            "maxItems": 16,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name", "driver"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 63},
                    "driver": _NAME,
                    "claim": {"type": "string", "enum": ["DRA", "Synthetic"], "default": "DRA"},
                    "deviceClassName": _NAME,
                    "count": {"type": "integer", "minimum": 1, "maximum": 64, "default": 1},
                    "attributes": {"type": "object", "maxProperties": 32, "additionalProperties": _ATTRIBUTE},
                    "capacity": _CAPACITY,
                },
            },
        },
    },
}

_SECRET_REF: Obj = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": _NAME, "key": {**_NAME, "default": "kubeconfig"}},
}

INFERENCE_CLUSTER_SPEC: Obj = {
    "type": "object",
    "required": ["cluster"],
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "cluster": {
            "type": "object",
            "required": ["source"],
            "properties": {
                "source": {"type": "string", "enum": ["GKE", "EKS", "AKS", "Nebius", "Vultr", "Existing"]},
                "existing": {
                    "type": "object",
                    "required": ["secretRef"],
                    "properties": {
                        "secretRef": _SECRET_REF,
                        "identitySecretRef": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": _NAME,
                                "key": {**_NAME, "default": "private_key"},
                                "type": {
                                    "type": "string",
                                    "enum": [
                                        "GoogleApplicationCredentials",
                                        "AWSWebIdentityCredentials",
                                        "NebiusServiceAccountCredentials",
                                    ],
                                    "default": "GoogleApplicationCredentials",
                                },
                            },
                        },
                        "cache": {"type": "object", "properties": {"storageClassName": _NAME}},
                    },
                },
                "vultr": {**_PRESERVE, "required": ["region"]},
                "gke": {**_PRESERVE, "required": ["region"]},
                "eks": {**_PRESERVE, "required": ["region"]},
                "aks": {**_PRESERVE, "required": ["location"]},
                "nebius": _PRESERVE,
            },
        },
        "taints": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["key", "effect"],
            "items": {
                "type": "object",
                "required": ["key", "effect"],
                "properties": {
                    "key": {"type": "string", "minLength": 1},
                    "value": {"type": "string"},
                    "effect": {"type": "string", "enum": ["NoSchedule", "NoExecute"]},
                },
            },
        },
        "nodePools": {
            "type": "array",
            "minItems": 1,
            "maxItems": 8,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name", "className"],
                "x-kubernetes-preserve-unknown-fields": True,  # capacityBlock, fabric (not Vultr/Existing)
                "properties": {
                    "name": {"type": "string", "maxLength": 40},
                    "className": _NAME,
                    "nodeCount": {"type": "integer", "minimum": 0, "default": 1},
                    "minNodeCount": {"type": "integer", "minimum": 0},
                    "maxNodeCount": {"type": "integer", "minimum": 1},
                    "zones": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
}

# What the simulated controller writes (Crossplane drops preserve-unknown-fields on status, so each
# field is declared; conditions come from Crossplane).
INFERENCE_CLUSTER_STATUS: Obj = {
    "type": "object",
    "properties": {
        "providerConfigRef": {"type": "object", "properties": {"name": {"type": "string"}}},
        "gateway": {"type": "object", "properties": {"address": {"type": "string"}}},
        "cache": {"type": "object", "properties": {"storageClassName": {"type": "string", "maxLength": 253}}},
        "gpuPools": {
            "type": "array",
            "maxItems": 8,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "nodes": {"type": "integer"},
                    "devices": {
                        "type": "array",
                        "maxItems": 16,
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {**_PRESERVE, "required": ["name", "driver"]},
                    },
                },
            },
        },
        "namespace": {"type": "string"},
    },
}

MODEL_REPLICA_SPEC: Obj = {
    "type": "object",
    "required": ["clusterName", "engines"],
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "clusterName": {"type": "string", "minLength": 1},
        "engines": {
            "type": "array",
            "minItems": 1,
            "maxItems": 8,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name", "members"],
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 63},
                    "members": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 2,
                        "x-kubernetes-list-type": "atomic",
                        "items": {**_PRESERVE, "required": ["nodePoolName", "template"]},
                    },
                },
            },
        },
    },
}


INFERENCE_GATEWAY_SPEC: Obj = {
    "type": "object",
    "required": ["backend"],
    "properties": {
        "backend": {"type": "string", "enum": ["Traefik"]},
        "traefik": {
            "type": "object",
            "required": ["version"],
            "properties": {
                "version": {"type": "string"},
                "loadBalancer": {"type": "string", "enum": ["MetalLB"]},
                "metallb": {
                    "type": "object",
                    "required": ["addressPool"],
                    "properties": {"addressPool": {"type": "string"}},
                },
            },
        },
    },
}
_ADDRESS_STATUS: Obj = {"type": "object", "properties": {"address": {"type": "string"}}}

# The engines/template of a deployment: preserved (the simulated scheduler reads them; the XRD checks them).
MODEL_DEPLOYMENT_SPEC: Obj = {
    "type": "object",
    "required": ["replicas", "template"],
    "properties": {
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
        "template": {**_PRESERVE, "required": ["spec"]},
    },
}
MODEL_DEPLOYMENT_STATUS: Obj = {
    "type": "object",
    "properties": {
        "replicas": {"type": "object", "properties": {"total": {"type": "integer"}, "ready": {"type": "integer"}}}
    },
}
MODEL_SERVICE_SPEC: Obj = {
    "type": "object",
    "required": ["endpoints"],
    "properties": {
        "endpoints": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["selector"],
                "properties": {
                    "weight": {"type": "integer", "minimum": 1, "maximum": 1000000, "default": 1},
                    "selector": {
                        "type": "object",
                        "required": ["matchLabels"],
                        "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}},
                    },
                },
            },
        }
    },
}
MODEL_CACHE_SPEC: Obj = {
    "type": "object",
    "required": ["source"],
    "x-kubernetes-preserve-unknown-fields": True,  # huggingFace, clusterSelector
    "properties": {"source": {"type": "string", "enum": ["HuggingFace"]}},
}
MODEL_CACHE_STATUS: Obj = {
    "type": "object",
    "properties": {
        "summary": {"type": "object", "properties": {"ready": {"type": "string"}}},
        "clusters": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "phase": {"type": "string", "enum": ["Pending", "Hydrating", "Ready", "Failed"]},
                    "message": {"type": "string"},
                },
            },
        },
    },
}


def _xrd(
    kind: str,
    scope: str,
    short: str,
    *,
    spec: Obj,
    status: Obj | None = None,
    columns: list[Obj],
    subresources: Obj | None = None,
) -> Obj:
    plural = PLURALS[kind]
    return {
        "apiVersion": f"{XRD_GROUP}/v2",
        "kind": XRD_KIND,
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "categories": ["crossplane", "modelplane"],
                "kind": kind,
                "plural": plural,
                "shortNames": [short],
            },
            "scope": scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "referenceable": True,
                    **({"additionalPrinterColumns": columns} if columns else {}),
                    **({"subresources": subresources} if subresources else {}),
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {"spec": spec, "status": status or {"type": "object"}},
                        }
                    },
                }
            ],
        },
    }


FALLBACK_XRDS: dict[str, Obj] = {
    "InferenceClass": _xrd("InferenceClass", CLUSTER, "icl", spec=INFERENCE_CLASS_SPEC, columns=[]),
    "InferenceCluster": _xrd(
        "InferenceCluster",
        CLUSTER,
        "ic",
        spec=INFERENCE_CLUSTER_SPEC,
        status=INFERENCE_CLUSTER_STATUS,
        columns=[
            {"name": "SOURCE", "type": "string", "jsonPath": ".spec.cluster.source"},
            {"name": "GATEWAY", "type": "string", "jsonPath": ".status.gateway.address"},
        ],
    ),
    "ModelReplica": _xrd(
        "ModelReplica",
        NAMESPACED,
        "mr",
        spec=MODEL_REPLICA_SPEC,
        columns=[{"name": "CLUSTER", "type": "string", "jsonPath": ".spec.clusterName"}],
    ),
    "InferenceGateway": _xrd(
        "InferenceGateway",
        CLUSTER,
        "ig",
        spec=INFERENCE_GATEWAY_SPEC,
        status=_ADDRESS_STATUS,
        columns=[
            {"name": "GATEWAY", "type": "string", "jsonPath": ".spec.backend"},
            {"name": "ADDRESS", "type": "string", "jsonPath": ".status.address"},
        ],
    ),
    "ModelDeployment": _xrd(
        "ModelDeployment",
        NAMESPACED,
        "md",
        spec=MODEL_DEPLOYMENT_SPEC,
        status=MODEL_DEPLOYMENT_STATUS,
        columns=[{"name": "REPLICAS", "type": "string", "jsonPath": ".status.replicas.ready"}],
        subresources={"scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas.total"}},
    ),
    "ModelService": _xrd(
        "ModelService",
        NAMESPACED,
        "ms",
        spec=MODEL_SERVICE_SPEC,
        status=_ADDRESS_STATUS,
        columns=[{"name": "ADDRESS", "type": "string", "jsonPath": ".status.address"}],
    ),
    "ModelCache": _xrd(
        "ModelCache",
        NAMESPACED,
        "mc",
        spec=MODEL_CACHE_SPEC,
        status=MODEL_CACHE_STATUS,
        columns=[
            {"name": "SOURCE", "type": "string", "jsonPath": ".spec.source.huggingFace.repo"},
            {"name": "READY", "type": "string", "jsonPath": ".status.summary.ready"},
        ],
    ),
}


# --- selection ------------------------------------------------------------------------------------


def load_xrd(path: Path) -> Obj:
    """One XRD file (a single YAML document)."""
    xrd = yaml.safe_load(path.read_text())
    if not isinstance(xrd, dict):
        raise ValueError(f"{path}: not a YAML mapping")
    return xrd


def fallback_crds() -> tuple[Obj, ...]:
    """The CRDs generated from the hand-written fallback XRDs (what a machine without ../shared serves)."""
    return tuple(crd_for_xrd(FALLBACK_XRDS[kind], source=FALLBACK) for kind in PLURALS)


def select_crds(xrd_dir: Path | None = XRD_DIR) -> tuple[tuple[Obj, ...], dict[str, str]]:
    """The CRDs to serve and, per kind, their source: ``xrd_dir/<plural>.yaml`` when it exists,
    else ``FALLBACK``. The generated CRD must serve the kind the lab expects."""
    crds: list[Obj] = []
    sources: dict[str, str] = {}
    for kind, plural in PLURALS.items():
        path = xrd_dir / f"{plural}.yaml" if xrd_dir is not None else None
        if path is not None and path.is_file():
            crd = crd_for_xrd(load_xrd(path), source=str(path))
            served = (crd["spec"]["group"], crd["spec"]["names"]["kind"], crd["spec"]["names"]["plural"])
            versions = [v["name"] for v in crd["spec"]["versions"] if v["served"]]
            if served != (GROUP, kind, plural) or VERSION not in versions:
                raise ValueError(f"{path}: serves {served} {versions}, not {(GROUP, kind, plural)} {VERSION}")
            sources[kind] = str(path)
        else:
            crd = crd_for_xrd(FALLBACK_XRDS[kind], source=FALLBACK)
            sources[kind] = FALLBACK
        crds.append(crd)
    return tuple(crds), sources


CRDS, SOURCES = select_crds()
KINDS = tuple(PLURALS)
