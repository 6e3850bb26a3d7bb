# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Object reads and writes on a Kubernetes API (the Modelplane control plane, the workload cluster).

Why a small adapter: the adoption only needs get / list / create / replace / delete of a handful of
kinds, as plain dicts, with "not found" as ``None`` and the HTTP status kept on errors (409 means
"someone else wrote it first" and is handled, not failed). ``KubeClient`` (``_kube/client.py``)
already builds the configuration the way kubernetes.core does and discovers CRDs; this wraps it.
The unit tests replace it with an in-memory fake that has the same five methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError
from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import (
    KindNotServed,
    KubeClient,
    _transport_errors,
    translate,
)

NOT_FOUND = 404
CONFLICT = 409  # AlreadyExists on create, a stale resourceVersion on replace
# Seconds one request may take (connect, read); waits poll, so one slow answer must not eat the deadline.
REQUEST_TIMEOUT = (5.0, 30.0)


class KubeObjects:
    """get / list / create / replace / delete of whole objects as dicts over one ``KubeClient``."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def close(self) -> None:
        self.client.close()

    def _resource(self, api_version: str, kind: str) -> Any:
        return self.client.resource(api_version, kind)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        resource = self._resource(api_version, kind)
        try:
            found = self.client.dynamic.get(resource, name=name, namespace=namespace, _request_timeout=REQUEST_TIMEOUT)
        except _transport_errors() as exc:
            if getattr(exc, "status", None) == NOT_FOUND:
                return None
            raise translate(exc, f"Reading {kind} {name}") from None
        return found.to_dict()

    def list(
        self, api_version: str, kind: str, *, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Every matching object (all namespaces when ``namespace`` is None); [] when the kind is not served."""
        try:
            resource = self._resource(api_version, kind)
        except KindNotServed:
            return []
        items, _version = self.client.list(
            resource, namespace=namespace, label_selector=label_selector, request_timeout=REQUEST_TIMEOUT[1]
        )
        return items

    def _write(self, verb: str, kind: str, name: str, call: Any) -> dict[str, Any]:
        try:
            return call().to_dict()
        except _transport_errors() as exc:
            error = translate(exc, f"{verb} {kind} {name}")
            raise ApiError(error.msg, status=error.status) from None

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        resource = self._resource(body["apiVersion"], body["kind"])
        return self._write(
            "Creating",
            body["kind"],
            meta["name"],
            lambda: self.client.dynamic.create(
                resource, body=dict(body), namespace=meta.get("namespace"), _request_timeout=REQUEST_TIMEOUT
            ),
        )

    def replace(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """PUT with the body's ``resourceVersion``: a concurrent write makes it fail with 409."""
        meta = body["metadata"]
        resource = self._resource(body["apiVersion"], body["kind"])
        return self._write(
            "Updating",
            body["kind"],
            meta["name"],
            lambda: self.client.dynamic.replace(
                resource, body=dict(body), namespace=meta.get("namespace"), _request_timeout=REQUEST_TIMEOUT
            ),
        )

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str | None = None,
    ) -> bool:
        """Delete; False when it was already gone."""
        resource = self._resource(api_version, kind)
        body = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation:
            body["propagationPolicy"] = propagation
        try:
            self.client.dynamic.delete(
                resource, name=name, namespace=namespace, body=body, _request_timeout=REQUEST_TIMEOUT
            )
        except _transport_errors() as exc:
            if getattr(exc, "status", None) == NOT_FOUND:
                return False
            error = translate(exc, f"Deleting {kind} {name}")
            raise ApiError(error.msg, status=error.status) from None
        return True
