# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes objects the bare-metal claims write (Leases, BareMetalHosts, Secrets), behind one small interface.

Why one interface for both claim backends: a Lease claim and a BareMetalHost claim rest on the same two API
server primitives (an atomic create, and an update that carries the ``resourceVersion`` it read, where the loser
gets 409), and both modules are decided from objects as dicts. The unit tests swap in an in-memory store with the
API server's conflict semantics; the lab and real clusters get ``KubeObjectStore`` over the collection's
``KubeClient``. A 409 raises ``Conflict`` (read again and re-plan), a 404 on a read or delete is "not there", and
every other failure is an ``ApiError`` whose message says what was being done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError

NOT_FOUND = 404
CONFLICT = 409
MERGE_PATCH = "application/merge-patch+json"
# Seconds per control-plane request (the connect part is capped at 5 s: an unreachable server fails fast).
REQUEST_TIMEOUT = 30.0
CONNECT_TIMEOUT_MAX = 5.0


class Conflict(ApiError):
    """409: the object changed, was created or was deleted meanwhile; read it again and re-plan."""

    kind = "conflict"


class ObjectStore(Protocol):
    def list(self, api_version: str, kind: str, namespace: str, label_selector: str | None) -> list[dict[str, Any]]: ...

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def patch(
        self, api_version: str, kind: str, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    def delete(
        self, api_version: str, kind: str, namespace: str, name: str, preconditions: Mapping[str, str] | None = None
    ) -> bool: ...


StoreFactory = Callable[[Mapping[str, Any]], Any]


class KubeObjectStore:
    """``ObjectStore`` over ``_kube/client.KubeClient`` (the kubernetes library's dynamic client)."""

    def __init__(self, client: Any, request_timeout: float = REQUEST_TIMEOUT) -> None:
        self.client = client
        self.timeout = (min(CONNECT_TIMEOUT_MAX, request_timeout), request_timeout)
        self._resources: dict[tuple[str, str], Any] = {}

    def close(self) -> None:
        self.client.close()

    def resource(self, api_version: str, kind: str) -> Any:
        """The API resource of a kind, discovered once per run."""
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
            self.resource(api_version, kind),
            namespace=namespace,
            label_selector=label_selector,
            request_timeout=self.timeout[1],
        )
        return items

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = self._call(
            f"Reading {kind} {namespace}/{name}",
            self.client.dynamic.get,
            self.resource(api_version, kind),
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
            self.resource(body["apiVersion"], body["kind"]),
            body=dict(body),
            namespace=meta["namespace"],
            _request_timeout=self.timeout,
        )
        if created is None:  # 404 on a create: the namespace does not exist
            raise ApiError(
                f"{doing}: namespace {meta['namespace']!r} does not exist; create it or set namespace to one"
                " that exists",
                status=NOT_FOUND,
            )
        return created.to_dict()

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        doing = f"Updating {body['kind']} {meta['namespace']}/{meta['name']}"
        found = self._call(
            doing,
            self.client.dynamic.replace,
            self.resource(body["apiVersion"], body["kind"]),
            body=dict(body),
            namespace=meta["namespace"],
            _request_timeout=self.timeout,
        )
        if found is None:  # deleted between our read and this update: someone released it; re-plan
            raise Conflict(f"{doing}: it was deleted meanwhile", status=NOT_FOUND)
        return found.to_dict()

    def patch(self, api_version: str, kind: str, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (``None`` deletes a field): for objects this run already holds."""
        doing = f"Patching {kind} {namespace}/{name}"
        found = self._call(
            doing,
            self.client.dynamic.patch,
            self.resource(api_version, kind),
            body=dict(patch),
            name=name,
            namespace=namespace,
            content_type=MERGE_PATCH,
            _request_timeout=self.timeout,
        )
        if found is None:
            raise Conflict(f"{doing}: it was deleted meanwhile", status=NOT_FOUND)
        return found.to_dict()

    def delete(
        self, api_version: str, kind: str, namespace: str, name: str, preconditions: Mapping[str, str] | None = None
    ) -> bool:
        """False when it was already gone; with ``preconditions`` (uid, resourceVersion) a changed object is a 409."""
        extra: dict[str, Any] = {}
        if preconditions:
            extra["body"] = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": dict(preconditions)}
        done = self._call(
            f"Deleting {kind} {namespace}/{name}",
            self.client.dynamic.delete,
            self.resource(api_version, kind),
            name=name,
            namespace=namespace,
            _request_timeout=self.timeout,
            **extra,
        )
        return done is not None


def connect(params: Mapping[str, Any]) -> KubeObjectStore:
    """A ``KubeObjectStore`` from a module's ``kubeconfig``/``context``/``validate_certs`` (never K8S_AUTH_*)."""
    from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import KubeClient

    auth = {"kubeconfig": params.get("kubeconfig"), "context": params.get("context")}
    if params.get("validate_certs") is not None:
        auth["validate_certs"] = params["validate_certs"]
    return KubeObjectStore(KubeClient.from_auth({k: v for k, v in auth.items() if v is not None}))


@contextmanager
def opened_store(module: Any, store_factory: StoreFactory | None, default_factory: StoreFactory) -> Iterator[Any]:
    """The store of one module run, closed when the run is done.

    ``default_factory`` (which needs the kubernetes library, so its absence fails naming it) unless a test passes
    its own ``store_factory``.
    """
    if store_factory is None:
        from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import KUBERNETES_IMPORT_ERROR

        module.require("kubernetes", KUBERNETES_IMPORT_ERROR)
        store_factory = default_factory
    store = store_factory(module.params)
    try:
        yield store
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()
