# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The few Kubernetes calls the Metal3 provisioner makes, behind one small interface.

Why an interface: the claim and the waits are decided in ``run.py`` from objects as dicts; the unit tests swap in an
in-memory store with the API server's conflict semantics (409 on a stale ``resourceVersion``), and the lab and real
clusters get ``KubeObjectStore`` over the collection's ``KubeClient``. Updates that take a host are full replaces
carrying the ``resourceVersion`` that was read (optimistic concurrency: of two consumers, one gets 409); updates of
a host this cluster already holds are JSON merge patches (``None`` deletes a field, as CAPM3's deprovision does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError

NOT_FOUND = 404
CONFLICT = 409
MERGE_PATCH = "application/merge-patch+json"


class Conflict(ApiError):
    """409: the object changed (or was created) meanwhile; read it again and re-plan."""

    kind = "conflict"


class ObjectStore(Protocol):
    def list(self, api_version: str, kind: str, namespace: str, label_selector: str | None) -> list[dict[str, Any]]: ...

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def patch(
        self, api_version: str, kind: str, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> bool: ...


class KubeObjectStore:
    """``ObjectStore`` over ``_kube/client.KubeClient`` (the kubernetes library's dynamic client)."""

    def __init__(self, client: Any, request_timeout: float) -> None:
        self.client = client
        self.timeout = (min(5.0, request_timeout), request_timeout)
        self._resources: dict[tuple[str, str], Any] = {}

    def close(self) -> None:
        self.client.close()

    def _resource(self, api_version: str, kind: str) -> Any:
        key = (api_version, kind)
        if key not in self._resources:
            self._resources[key] = self.client.resource(api_version, kind)
        return self._resources[key]

    def _call(self, doing: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import (
            _transport_errors,
            translate,
        )

        try:
            return fn(*args, **kwargs)
        except _transport_errors() as exc:
            status = getattr(exc, "status", None)
            if status == CONFLICT:
                raise Conflict(f"{doing}: it changed meanwhile (HTTP 409)", status=CONFLICT) from None
            if status == NOT_FOUND:
                return None
            error = translate(exc, doing)
            raise ApiError(error.msg, status=error.status) from None

    def list(self, api_version: str, kind: str, namespace: str, label_selector: str | None) -> list[dict[str, Any]]:
        items, _version = self.client.list(
            self._resource(api_version, kind),
            namespace=namespace,
            label_selector=label_selector,
            request_timeout=self.timeout[1],
        )
        return items

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = self._call(
            f"Reading {kind} {namespace}/{name}",
            self.client.dynamic.get,
            self._resource(api_version, kind),
            name=name,
            namespace=namespace,
            _request_timeout=self.timeout,
        )
        return None if found is None else found.to_dict()

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        doing = f"Creating {body['kind']} {meta['namespace']}/{meta['name']}"
        created = self._call(
            doing,
            self.client.dynamic.create,
            self._resource(body["apiVersion"], body["kind"]),
            body=dict(body),
            namespace=meta["namespace"],
            _request_timeout=self.timeout,
        )
        if created is None:
            raise ApiError(f"{doing}: namespace {meta['namespace']!r} does not exist", status=NOT_FOUND)
        return created.to_dict()

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        doing = f"Updating {body['kind']} {meta['namespace']}/{meta['name']}"
        found = self._call(
            doing,
            self.client.dynamic.replace,
            self._resource(body["apiVersion"], body["kind"]),
            body=dict(body),
            namespace=meta["namespace"],
            _request_timeout=self.timeout,
        )
        if found is None:
            raise Conflict(f"{doing}: it was deleted meanwhile", status=NOT_FOUND)
        return found.to_dict()

    def patch(self, api_version: str, kind: str, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        doing = f"Patching {kind} {namespace}/{name}"
        found = self._call(
            doing,
            self.client.dynamic.patch,
            self._resource(api_version, kind),
            body=dict(patch),
            name=name,
            namespace=namespace,
            content_type=MERGE_PATCH,
            _request_timeout=self.timeout,
        )
        if found is None:
            raise Conflict(f"{doing}: it was deleted meanwhile", status=NOT_FOUND)
        return found.to_dict()

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> bool:
        done = self._call(
            f"Deleting {kind} {namespace}/{name}",
            self.client.dynamic.delete,
            self._resource(api_version, kind),
            name=name,
            namespace=namespace,
            _request_timeout=self.timeout,
        )
        return done is not None
