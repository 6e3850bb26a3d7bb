"""The StorageClass decisions the ``longhorn_rwx`` role used to take in Jinja: drift, definition, replicas."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.filter.storage_class import FilterModule
from ansible_collections.metalplane.inference.plugins.module_utils._kube.storage_class import (
    longhorn_replicas,
    storage_class_definition,
    storage_class_drift,
)

META = {"name": "rwx", "labels": {"app.kubernetes.io/managed-by": "metalplane.inference"}}
WANTED: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": META,
    "provisioner": "driver.longhorn.io",
    "allowVolumeExpansion": True,
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "Immediate",
    "parameters": {"numberOfReplicas": "2", "fsType": "ext4"},
}


def live(**changes: Any) -> dict[str, Any]:
    """The live class: the wanted one as the apiserver returns it, with ``changes`` (None removes a field)."""
    obj = {**WANTED, "metadata": {**META, "resourceVersion": "7"}}
    for key, value in changes.items():
        if value is None:
            obj.pop(key, None)
        else:
            obj[key] = value
    return obj


# (live class, expected drift)
DRIFT = [
    (None, []),  # no class yet: it is created as wanted
    (live(), []),
    (live(allowVolumeExpansion=False), []),  # mutable: applied, not drift
    (
        live(parameters={"numberOfReplicas": "1", "fsType": "ext4"}),
        [{"field": "parameters.numberOfReplicas", "live": "1", "wanted": "2"}],
    ),
    (
        live(parameters={"numberOfReplicas": "2", "fsType": "ext4", "extra": "x"}),
        [{"field": "parameters.extra", "live": "x", "wanted": None}],
    ),
    (
        live(parameters=None, reclaimPolicy="Retain"),
        [
            {"field": "parameters.fsType", "live": None, "wanted": "ext4"},
            {"field": "parameters.numberOfReplicas", "live": None, "wanted": "2"},
            {"field": "reclaimPolicy", "live": "Retain", "wanted": "Delete"},
        ],
    ),
    (
        live(provisioner="other", volumeBindingMode=None),
        [
            {"field": "provisioner", "live": "other", "wanted": "driver.longhorn.io"},
            {"field": "volumeBindingMode", "live": None, "wanted": "Immediate"},
        ],
    ),
]


@pytest.mark.parametrize(("observed", "drift"), DRIFT)
def test_storage_class_drift(observed: dict[str, Any] | None, drift: list[dict[str, Any]]) -> None:
    assert storage_class_drift(WANTED, observed) == drift


# (live class, fields of the definition that differ from the wanted class: name -> value, or None when left out)
DEFINITION = [
    (None, {}),
    (live(allowVolumeExpansion=False), {}),  # the wanted mutable value is applied
    (live(parameters={"numberOfReplicas": "1"}), {"parameters": {"numberOfReplicas": "1"}}),
    (live(reclaimPolicy="Retain", volumeBindingMode=None), {"reclaimPolicy": "Retain", "volumeBindingMode": None}),
]


@pytest.mark.parametrize(("observed", "kept"), DEFINITION)
def test_storage_class_definition(observed: dict[str, Any] | None, kept: dict[str, Any]) -> None:
    definition = storage_class_definition(WANTED, observed)
    expected = {**WANTED, **{k: v for k, v in kept.items() if v is not None}}
    for key, value in kept.items():
        if value is None:
            expected.pop(key)
    assert definition == expected


@pytest.mark.parametrize(
    ("nodes", "override", "replicas"),
    [(0, 0, 1), (1, 0, 1), (2, 0, 2), (3, 0, 3), (7, 0, 3), (7, 5, 5), (1, 2, 2), (2, -1, 2)],
)
def test_longhorn_replicas(nodes: int, override: int, replicas: int) -> None:
    assert longhorn_replicas(nodes, override) == replicas


@pytest.mark.parametrize(("nodes", "override", "replicas"), [("2", "0", 2), (4, None, 3), ("1", "2", 2)])
def test_replicas_filter_takes_what_jinja_hands_over(nodes: Any, override: Any, replicas: int) -> None:
    assert FilterModule().filters()["longhorn_replicas"](nodes, override) == replicas
