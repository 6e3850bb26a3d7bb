"""Defaulting and the semantic rules the apiserver enforces beyond the OpenAPI shape.

Why: clients compare what they sent with what came back (kubernetes.core's idempotency, helm's
three-way merge); a server that does not default ``replicas``, ``imagePullPolicy`` or
``Secret.stringData`` makes a second run look like a change, and one that skips the Go zero values
of required status fields breaks the strict kubernetes Python client models.
"""

from __future__ import annotations

import base64
import ipaddress
import itertools
import json
from typing import Any

from lab.kube import structural
from lab.kube.discovery import ResourceType

Obj = dict[str, Any]

_cluster_ips = itertools.count(10)


def _pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if not isinstance(container, dict):
            continue
        image = str(container.get("image", ""))
        tag = image.rsplit("/", 1)[-1]
        latest = ":" not in tag or tag.endswith(":latest")
        container.setdefault("imagePullPolicy", "Always" if latest and "@" not in image else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
        for port in container.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")


def _template(spec: Obj) -> None:
    template = spec.get("template")
    if isinstance(template, dict):
        template.setdefault("metadata", {})
        if isinstance(template.get("spec"), dict):
            _pod_spec(template["spec"])


def apply_defaults(rtype: ResourceType, obj: Obj, old: Obj | None) -> None:
    kind = rtype.kind
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else None
    if kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif kind == "Secret":
        string_data = obj.pop("stringData", None) or {}
        data = obj.setdefault("data", {}) if string_data or "data" in obj else None
        for key, value in string_data.items():
            assert data is not None
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj.setdefault("type", "Opaque")
    elif kind == "Pod" and spec is not None:
        _pod_spec(spec)
        obj.setdefault("status", {}).setdefault("phase", "Pending")
        obj["status"].setdefault("qosClass", "BestEffort")
    elif kind == "Deployment" and spec is not None:
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        spec.setdefault(
            "strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
        )
        _template(spec)
    elif kind == "DaemonSet" and spec is not None:
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault(
            "updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
        )
        _template(spec)
        status = obj.setdefault("status", {})
        for field in ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"):
            status.setdefault(field, 0)
    elif kind == "StatefulSet" and spec is not None:
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
        _template(spec)
        obj.setdefault("status", {}).setdefault("replicas", 0)
    elif kind == "ReplicaSet" and spec is not None:
        spec.setdefault("replicas", 1)
        _template(spec)
        obj.setdefault("status", {}).setdefault("replicas", 0)
    elif kind == "Job" and spec is not None:
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)
        _template(spec)
        if isinstance(spec.get("template"), dict):
            spec["template"].setdefault("spec", {}).setdefault("restartPolicy", "Never")
    elif kind == "Service" and spec is not None:
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("clusterIP") != "None":
            previous = ((old or {}).get("spec") or {}).get("clusterIP")
            spec.setdefault("clusterIP", previous or str(ipaddress.ip_address("10.96.0.0") + next(_cluster_ips)))
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                port.setdefault("targetPort", port.get("port"))
        obj.setdefault("status", {}).setdefault("loadBalancer", {})
    elif kind == "PersistentVolumeClaim" and spec is not None:
        spec.setdefault("volumeMode", "Filesystem")
        obj.setdefault("status", {}).setdefault("phase", "Pending")
    elif kind == "StorageClass":
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
        if old is None and obj.get("parameters") == {}:
            # Go's map with `omitempty`: an empty map is not stored, so it does not come back either.
            # (An update that sends {} over no parameters is still a change; see _storage_class_errors.)
            del obj["parameters"]
    elif kind == "CustomResourceDefinition" and spec is not None:
        for version in spec.get("versions") or []:
            if isinstance(version, dict):
                version.setdefault("served", True)
        names = spec.get("names") or {}
        if isinstance(names, dict) and names.get("kind"):
            names.setdefault("singular", str(names["kind"]).lower())
            names.setdefault("listKind", f"{names['kind']}List")
        obj.setdefault("status", {}).setdefault("conditions", [])
        obj["status"].setdefault(
            "storedVersions",
            [v["name"] for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("storage")],
        )


def _selector_matches(selector: Obj, labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr.get("operator"), expr.get("key"), expr.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values):
            return False
        if (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


# StorageClass fields an update may not change, in the order kube-apiserver's
# ValidateStorageClassUpdate reports them (pkg/apis/storage/validation): three are Forbidden outright,
# volumeBindingMode goes through ValidateImmutableField. Checked against kube-apiserver v1.20.2 (the
# k8s-real lane) by tests/integration/kube_conformance/test_kubeconf_storageclass.py.
STORAGE_CLASS_FORBIDDEN_UPDATES = ("parameters", "provisioner", "reclaimPolicy")


def _storage_class_errors(obj: Obj, old: Obj) -> list[dict[str, str]]:
    causes = [
        {"reason": "FieldValueForbidden", "field": name, "message": f"Forbidden: updates to {name} are forbidden."}
        # reflect.DeepEqual on the decoded objects: a missing map and an empty one differ.
        for name in STORAGE_CLASS_FORBIDDEN_UPDATES
        if obj.get(name) != old.get(name)
    ]
    mode = obj.get("volumeBindingMode")
    if mode != old.get("volumeBindingMode"):
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "field": "volumeBindingMode",
                "message": f"Invalid value: {json.dumps(mode)}: field is immutable",
            }
        )
    return causes


def semantic_errors(rtype: ResourceType, obj: Obj, old: Obj | None) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    if rtype.kind == "StorageClass" and rtype.group == "storage.k8s.io" and old is not None:
        causes += _storage_class_errors(obj, old)
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if rtype.kind in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet") and spec:
        selector = spec.get("selector") or {}
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if isinstance(selector, dict) and not _selector_matches(selector, labels):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.template.metadata.labels",
                    "message": "Invalid value: `selector` does not match template `labels`",
                }
            )
        if old is not None and (old.get("spec") or {}).get("selector") != selector:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.selector",
                    "message": "Invalid value: field is immutable",
                }
            )
    immutable = rtype.kind in ("ConfigMap", "Secret") and old is not None and old.get("immutable")
    if immutable and any(obj.get(k) != old.get(k) for k in ("data", "binaryData", "immutable")):
        causes.append(
            {
                "reason": "FieldValueForbidden",
                "field": "data",
                "message": "Forbidden: field is immutable when `immutable` is set",
            }
        )
    if rtype.kind == "CustomResourceDefinition":
        names = spec.get("names") or {}
        want = f"{names.get('plural')}.{spec.get('group')}"
        if obj["metadata"].get("name") != want:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": "metadata.name",
                    "message": f'Invalid value: "{obj["metadata"].get("name")}": must be spec.names.plural+"."'
                    "+spec.group",
                }
            )
        storage = [v for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("storage")]
        if len(storage) != 1:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.versions",
                    "message": "Invalid value: must have exactly one version marked as storage version",
                }
            )
        if old is not None and (old.get("spec") or {}).get("scope") != spec.get("scope"):
            causes.append(
                {"reason": "FieldValueInvalid", "field": "spec.scope", "message": "Invalid value: field is immutable"}
            )
        if rtype.version == "v1":
            causes += structural.crd_errors(spec)  # 422 for a v1 CRD whose schemas are not structural
    return causes
