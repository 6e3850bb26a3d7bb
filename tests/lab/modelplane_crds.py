"""Hand-written CRDs for the Modelplane kinds the lab's control plane serves (``modelplane.ai/v1alpha1``).

Why hand-written: Modelplane's XRDs (Crossplane ``CompositeResourceDefinition``s) are not part of this
repository and not available to users, so the lab ships small structural schemas of its own, written
from ``docs/modelplane.md`` and the facts the modules rely on. They check what the collection's
builders produce (required fields, enums, bounds, defaults the modules expect) and are permissive
elsewhere (``x-kubernetes-preserve-unknown-fields``). No CEL rules (the emulator has no CEL).

Kinds: InferenceClass (cluster-scoped), InferenceCluster (cluster-scoped), ModelReplica (namespaced,
Modelplane-internal: served so that the lab can model replicas pinned to a cluster).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
GROUP = "modelplane.ai"
VERSION = "v1alpha1"

_PRESERVE: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_NAME: Obj = {"type": "string", "minLength": 1, "maxLength": 253}

# Crossplane XR status: conditions (Ready/Synced + kind-specific ones) and free-form fields.
_STATUS: Obj = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "conditions": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "required": ["type", "status"],
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "type": {"type": "string"},
                    "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                    "reason": {"type": "string"},
                    "message": {"type": "string"},
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                    "observedGeneration": {"type": "integer"},
                },
            },
        },
    },
}

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

INFERENCE_CLASS_SPEC: Obj = {
    "type": "object",
    "required": ["devices"],
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
                    "capacity": {
                        "type": "object",
                        "maxProperties": 32,
                        "additionalProperties": {
                            "type": "object",
                            "required": ["value"],
                            "properties": {"value": {"type": "string", "minLength": 1, "maxLength": 32}},
                        },
                    },
                },
            },
        },
    },
    "x-kubernetes-preserve-unknown-fields": True,  # Crossplane's spec.crossplane and future fields
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
                    "name": {"type": "string", "minLength": 1, "maxLength": 40},
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

MODEL_REPLICA_SPEC: Obj = {
    "type": "object",
    "required": ["clusterName", "engines"],
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "clusterName": {"type": "string", "minLength": 1},
        "engines": {"type": "array", "minItems": 1, "items": _PRESERVE},
    },
}


def _crd(kind: str, plural: str, scope: str, short: str, *, spec: Obj, columns: list[Obj]) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "modelplane-lab"}},
        "spec": {
            "group": GROUP,
            "scope": scope,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
                "categories": ["crossplane", "modelplane"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        *columns,
                        {
                            "name": "READY",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                        },
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": _STATUS,
                            },
                        }
                    },
                }
            ],
        },
    }


CRDS: tuple[Obj, ...] = (
    _crd("InferenceClass", "inferenceclasses", "Cluster", "icl", spec=INFERENCE_CLASS_SPEC, columns=[]),
    _crd(
        "InferenceCluster",
        "inferenceclusters",
        "Cluster",
        "ic",
        spec=INFERENCE_CLUSTER_SPEC,
        columns=[
            {"name": "SOURCE", "type": "string", "jsonPath": ".spec.cluster.source"},
            {"name": "GATEWAY", "type": "string", "jsonPath": ".status.gateway.address"},
        ],
    ),
    _crd(
        "ModelReplica",
        "modelreplicas",
        "Namespaced",
        "mr",
        spec=MODEL_REPLICA_SPEC,
        columns=[{"name": "CLUSTER", "type": "string", "jsonPath": ".spec.clusterName"}],
    ),
)
KINDS = tuple(crd["spec"]["names"]["kind"] for crd in CRDS)
