"""The emulator's type registry and the discovery documents built from it.

Why: the kubernetes Python client's DynamicClient and kubernetes.core find every kind through
``/api``, ``/apis`` and per group-version resource lists; a kind missing there is a kind the
collection cannot use. The built-in table lists the kinds this collection (and helm charts it
installs) touch; CRDs add entries at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lab.kube import schemas

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
SUB_VERBS = ["get", "patch", "update"]

# The version /version reports; matches the schema set in kube_schemas (resource.k8s.io/v1 is GA).
VERSION_INFO = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0-metalplane-lab",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool = False
    scale: bool = False
    short_names: tuple[str, ...] = ()
    # CRD-only: the structural schema, its validator, extra field selectors, and when discovery shows it.
    crd: str | None = None
    schema: schemas.Schema | None = None
    validator: Any = None
    selectable_fields: tuple[str, ...] = ()
    visible_at: float = 0.0
    categories: tuple[str, ...] = ()
    field_selectors: tuple[str, ...] = field(default=())

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def object_schema(self) -> schemas.Schema | None:
        if self.crd is not None:
            return self.schema
        return schemas.builtin_schema(self.group, self.version, self.kind)


def _t(
    gv: str,
    plural: str,
    kind: str,
    namespaced: bool,
    *,
    status: bool = False,
    scale: bool = False,
    short: tuple[str, ...] = (),
    fields: tuple[str, ...] = (),
) -> ResourceType:
    group, _sep, version = gv.rpartition("/")
    return ResourceType(group, version, plural, kind, namespaced, status, scale, short, field_selectors=fields)


BUILTINS: tuple[ResourceType, ...] = (
    _t("v1", "namespaces", "Namespace", False, status=True, short=("ns",), fields=("status.phase",)),
    _t("v1", "nodes", "Node", False, status=True, short=("no",), fields=("spec.unschedulable",)),
    _t(
        "v1",
        "pods",
        "Pod",
        True,
        status=True,
        short=("po",),
        fields=(
            "spec.nodeName",
            "status.phase",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.podIP",
            "status.nominatedNodeName",
        ),
    ),
    _t("v1", "secrets", "Secret", True, fields=("type",)),
    _t("v1", "configmaps", "ConfigMap", True, short=("cm",)),
    _t("v1", "serviceaccounts", "ServiceAccount", True, short=("sa",)),
    _t("v1", "services", "Service", True, status=True, short=("svc",)),
    _t("v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, status=True, short=("pvc",)),
    _t("v1", "persistentvolumes", "PersistentVolume", False, status=True, short=("pv",)),
    _t("v1", "events", "Event", True, short=("ev",)),
    _t("apps/v1", "deployments", "Deployment", True, status=True, scale=True, short=("deploy",)),
    _t("apps/v1", "daemonsets", "DaemonSet", True, status=True, short=("ds",)),
    _t("apps/v1", "statefulsets", "StatefulSet", True, status=True, scale=True, short=("sts",)),
    _t("apps/v1", "replicasets", "ReplicaSet", True, status=True, scale=True, short=("rs",)),
    _t("batch/v1", "jobs", "Job", True, status=True),
    _t("storage.k8s.io/v1", "storageclasses", "StorageClass", False, short=("sc",)),
    _t("storage.k8s.io/v1", "csidrivers", "CSIDriver", False),
    _t(
        "apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        status=True,
        short=("crd", "crds"),
    ),
    _t("resource.k8s.io/v1", "resourceslices", "ResourceSlice", False, fields=("spec.driver", "spec.nodeName")),
    _t("resource.k8s.io/v1", "deviceclasses", "DeviceClass", False),
    _t("resource.k8s.io/v1", "resourceclaims", "ResourceClaim", True, status=True),
    _t("resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    _t("coordination.k8s.io/v1", "leases", "Lease", True),
    _t("rbac.authorization.k8s.io/v1", "roles", "Role", True),
    _t("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", True),
    _t("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", False),
    _t("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", False),
)

# Preferred order of groups in /apis (core first, like a real server).
GROUP_ORDER = (
    "apps",
    "batch",
    "storage.k8s.io",
    "apiextensions.k8s.io",
    "resource.k8s.io",
    "coordination.k8s.io",
    "rbac.authorization.k8s.io",
)


def api_resource(rtype: ResourceType) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {
        "name": rtype.plural,
        "singularName": rtype.singular,
        "namespaced": rtype.namespaced,
        "kind": rtype.kind,
        "verbs": VERBS,
    }
    if rtype.short_names:
        entry["shortNames"] = list(rtype.short_names)
    if rtype.categories:
        entry["categories"] = list(rtype.categories)
    out = [entry]
    if rtype.status:
        out.append(
            {
                "name": f"{rtype.plural}/status",
                "singularName": "",
                "namespaced": rtype.namespaced,
                "kind": rtype.kind,
                "verbs": SUB_VERBS,
            }
        )
    if rtype.scale:
        out.append(
            {
                "name": f"{rtype.plural}/scale",
                "singularName": "",
                "namespaced": rtype.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": SUB_VERBS,
            }
        )
    return out


def resource_list(group_version: str, types: list[ResourceType]) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for rtype in types:
        resources += api_resource(rtype)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def core_versions() -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
    }


def api_group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": entries, "preferredVersion": entries[0]}


def group_list(groups: dict[str, list[str]]) -> dict[str, Any]:
    ordered = [g for g in GROUP_ORDER if g in groups] + sorted(g for g in groups if g not in GROUP_ORDER)
    out = []
    for name in ordered:
        item = api_group(name, groups[name])
        del item["kind"], item["apiVersion"]
        out.append(item)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}
