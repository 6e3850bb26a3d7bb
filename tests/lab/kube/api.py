"""The request core of the Kubernetes emulator: routing, verbs and the admission pipeline.

Why: everything the collection does after provisioning goes through a Kubernetes API, and tests
can only trust a target that answers like kube-apiserver: Status bodies with reason and code, 409 on
stale resourceVersions and apply conflicts, 422 on schema violations, 415 for strategic merge on
custom resources, status subresource separation, finalizers, dryRun. The HTTP transport lives in
``lab.kube.server``; this module is transport-free so the in-process API uses the very same code paths.
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import yaml

from lab.kube import discovery, schemas
from lab.kube import patch as patching
from lab.kube.discovery import ResourceType
from lab.kube.store import Event, Key, SelectorError, Store, Watcher, field_matcher, label_matcher

Obj = dict[str, Any]
LOG = logging.getLogger("lab.kube")

# Annotation that holds a workload unready (the workload controller leaves it at 0 ready).
HOLD_ANNOTATION = "lab.metalplane.io/hold-unready"
# Kinds whose metadata.generation the server maintains (spec changes bump it).
GENERATION_GROUPS = {"apps", "batch", "apiextensions.k8s.io", "resource.k8s.io"}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Response:
    status: int
    body: Any = None
    content_type: str = "application/json"
    stream: Iterator[bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def json_bytes(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


class ApiError(Exception):
    """A Kubernetes Status failure."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _gr(rtype: ResourceType) -> str:
    return f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural


def not_found(rtype: ResourceType, name: str) -> ApiError:
    details = {"name": name, "group": rtype.group, "kind": rtype.plural}
    return ApiError(404, "NotFound", f'{_gr(rtype)} "{name}" not found', details)


def invalid(rtype: ResourceType, name: str, causes: list[dict[str, str]]) -> ApiError:
    # Go's aggregate error: one cause as is, several in brackets.
    text = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    text = f"[{text}]" if len(causes) > 1 else text
    kind = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    details = {"name": name, "group": rtype.group, "kind": rtype.kind, "causes": causes}
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {text}', details)


def _managed_order(entry: Obj) -> tuple[str, str, str, str, str]:
    # kube-apiserver's sortEncodedManagedFields: operation (Apply before Update), then time (to the
    # second: RFC 3339 strings compare in time order), manager, apiVersion, subresource.
    return (
        entry.get("operation") or "",
        entry.get("time") or "",
        entry.get("manager") or "",
        entry.get("apiVersion") or "",
        entry.get("subresource") or "",
    )


def tidy_managed_fields(obj: Obj) -> None:
    """managedFields as kube-apiserver stores them after a write: a field the object no longer has is
    owned by no one, an entry left owning nothing is dropped, and the entries are sorted."""
    entries = []
    for entry in obj["metadata"].get("managedFields") or []:
        paths = patching.from_fields_v1(entry.get("fieldsV1") or {})
        kept = {p for p in paths if patching.value_at(obj, p)[0]}
        if kept:
            entries.append(entry if kept == paths else {**entry, "fieldsV1": patching.to_fields_v1(kept)})
    entries.sort(key=_managed_order)
    obj["metadata"]["managedFields"] = entries


# The options kind a write verb decodes its query into (named in the 422 of a bad ``dryRun``).
OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions", "DELETE": "DeleteOptions"}
# The only dryRun value kube-apiserver accepts (``metav1.DryRunAll``).
DRY_RUN_VALUES = ("All",)


def check_dry_run(options_kind: str, values: list[str]) -> None:
    """422 Invalid for a ``dryRun`` other than ``All``, worded like the apiserver's options validation."""
    if all(v in DRY_RUN_VALUES for v in values):
        return
    shown = "[]string{" + ", ".join(json.dumps(v) for v in values) + "}"
    supported = ", ".join(json.dumps(v) for v in DRY_RUN_VALUES)
    message = f"Unsupported value: {shown}: supported values: {supported}"
    cause = {"reason": "FieldValueNotSupported", "field": "dryRun", "message": message}
    details = {"group": "meta.k8s.io", "kind": options_kind, "causes": [cause]}
    raise ApiError(422, "Invalid", f'{options_kind}.meta.k8s.io "" is invalid: dryRun: {message}', details)


def conflict(rtype: ResourceType, name: str, why: str) -> ApiError:
    message = f'Operation cannot be fulfilled on {_gr(rtype)} "{name}": {why}'
    return ApiError(409, "Conflict", message, {"name": name, "group": rtype.group, "kind": rtype.plural})


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""
    # Every value of a repeated query parameter (``query`` keeps the last), e.g. dryRun=All&dryRun=X.
    repeated: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        method: str,
        path: str,
        query: str | dict[str, str] = "",
        headers: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> Request:
        pairs = parse_qsl(query, keep_blank_values=True) if isinstance(query, str) else list(query.items())
        repeated: dict[str, list[str]] = {}
        for key, value in pairs:
            repeated.setdefault(key, []).append(value)
        lowered = {k.lower(): v for k, v in (headers or {}).items()}
        return cls(method.upper(), path, dict(pairs), lowered, body, repeated)


@dataclass
class Target:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    sub: str | None


class ApiServer:
    """Kubernetes API semantics over a ``Store``; controllers are scheduled through ``schedule``."""

    def __init__(self, store: Store, schedule: Callable[[float, Callable[[], None]], None], delay_scale: float) -> None:
        self.store = store
        self.schedule = schedule
        self.delay_scale = delay_scale
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.on_write: list[Callable[[ResourceType, str, Obj, Obj | None], None]] = []
        for rtype in discovery.BUILTINS:
            self.register(rtype)
        self.ca_bundle = ""

    # --- type registry --------------------------------------------------------------------------

    def register(self, rtype: ResourceType) -> None:
        self.types[(rtype.group, rtype.version, rtype.plural)] = rtype

    def unregister_crd(self, crd_name: str) -> None:
        for key in [k for k, t in self.types.items() if t.crd == crd_name]:
            del self.types[key]

    def type_for(self, api_version: str, kind: str) -> ResourceType:
        group, _sep, version = api_version.rpartition("/")
        for rtype in self.types.values():
            if rtype.group == group and rtype.version == version and rtype.kind == kind:
                return rtype
        raise ApiError(404, "NotFound", f"the server could not find the requested resource ({kind} in {api_version})")

    def _visible(self) -> list[ResourceType]:
        now = time.monotonic()
        return [t for t in self.types.values() if t.visible_at <= now]

    def path_for(
        self, rtype: ResourceType, namespace: str | None, name: str | None = None, sub: str | None = None
    ) -> str:
        prefix = "/api/v1" if not rtype.group else f"/apis/{rtype.group}/{rtype.version}"
        path = prefix + (f"/namespaces/{namespace}" if rtype.namespaced and namespace else "") + f"/{rtype.plural}"
        if name:
            path += f"/{name}"
        if sub:
            path += f"/{sub}"
        return path

    # --- entry point ----------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        try:
            return self._route(request)
        except ApiError as exc:
            return Response(exc.code, exc.status())
        except SelectorError as exc:
            return Response(400, ApiError(400, "BadRequest", str(exc)).status())
        except Exception as exc:  # an emulator bug must surface as a 500 Status, not a dropped connection
            LOG.exception("request %s %s failed", request.method, request.path)
            return Response(500, ApiError(500, "InternalError", f"lab emulator error: {exc!r}").status())

    def _route(self, request: Request) -> Response:  # noqa: PLR0911 - one branch per discovery path
        path = request.path.rstrip("/") or "/"
        if path == "/version":
            return Response(200, discovery.VERSION_INFO)
        if path in ("/healthz", "/readyz", "/livez"):
            return Response(200, "ok", "text/plain")
        if path == "/api":
            return Response(200, discovery.core_versions())
        if path == "/apis":
            groups: dict[str, list[str]] = {}
            for rtype in self._visible():
                if rtype.group and rtype.version not in groups.setdefault(rtype.group, []):
                    groups[rtype.group].append(rtype.version)
            return Response(200, discovery.group_list(groups))
        if path.startswith("/openapi/v3"):
            return self._openapi(path)
        if path == "/openapi/v2":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 2:
            if len(parts) == 2:
                versions = sorted({t.version for t in self._visible() if t.group == parts[1]}, reverse=True)
                if not versions:
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
                return Response(200, discovery.api_group(parts[1], versions))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            types = [t for t in self._visible() if t.group == group and t.version == version]
            if not types:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return Response(200, discovery.resource_list(types[0].group_version, types))
        target = self._target(group, version, rest)
        return self._dispatch(request, target)

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        rtype = self.types.get((group, version, rest[0]))
        if rtype is None or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if namespace is not None and not rtype.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if rtype.namespaced and name and namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        allowed = (sub == "status" and rtype.status) or (sub == "scale" and rtype.scale) or sub == "finalize"
        if (sub and not allowed) or (sub == "finalize" and rtype.kind != "Namespace"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return Target(rtype, namespace, name, sub)

    def _dispatch(self, request: Request, target: Target) -> Response:  # noqa: PLR0911 - one branch per verb
        method, rtype = request.method, target.rtype
        if method in OPTIONS_KIND and "dryRun" in request.query:
            check_dry_run(OPTIONS_KIND[method], request.repeated.get("dryRun") or [request.query["dryRun"]])
        if target.name is None:
            if method == "GET":
                if request.query.get("watch") in ("1", "true"):
                    return self.watch(target, request.query)
                return Response(200, self.list(target, request.query))
            if method == "POST":
                obj = self._body(request, rtype)
                return self.create(target, obj, request.query, self._manager(request))
            if method == "DELETE":
                return Response(200, self.delete_collection(target, request.query))
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on a collection")
        if method == "GET":
            obj = self._get(target)
            return Response(200, self._scale(obj) if target.sub == "scale" else self._out(rtype, obj))
        if method == "PUT":
            obj = self._body(request, rtype)
            return self.replace(target, obj, request.query, self._manager(request))
        if method == "PATCH":
            return self.patch(target, request)
        if method == "DELETE":
            options = self._delete_options(request)
            if isinstance(options.get("dryRun"), list):
                check_dry_run("DeleteOptions", [str(v) for v in options["dryRun"]])
            options.update({k: v for k, v in request.query.items() if k in ("propagationPolicy", "dryRun")})
            return self.delete(target, options)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")

    @staticmethod
    def _delete_options(request: Request) -> Obj:
        if not request.body.strip():
            return {}
        if "protobuf" in request.headers.get("content-type", ""):
            from lab.kube.proto import ProtobufError, decode

            try:
                return decode(request.body, "DeleteOptions")
            except ProtobufError as exc:
                raise ApiError(415, "UnsupportedMediaType", str(exc)) from exc
        try:
            return json.loads(request.body)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"invalid DeleteOptions: {exc}") from exc

    @staticmethod
    def _manager(request: Request) -> str:
        manager = request.query.get("fieldManager")
        if manager:
            return manager
        agent = request.headers.get("user-agent", "unknown")
        return agent.split("/", 1)[0] or "unknown"

    def _body(self, request: Request, rtype: ResourceType) -> Obj:
        content_type = request.headers.get("content-type", "application/json").split(";")[0].strip()
        if "protobuf" in content_type:
            from lab.kube.proto import ProtobufError, decode

            try:
                return decode(request.body, rtype.kind)
            except ProtobufError as exc:
                raise ApiError(415, "UnsupportedMediaType", str(exc)) from exc
        try:
            body = yaml.safe_load(request.body) if "yaml" in content_type else json.loads(request.body or b"null")
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(400, "BadRequest", f"the body of the request was in an unknown format: {exc}") from exc
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be an object")
        return body

    # --- reads ----------------------------------------------------------------------------------

    def key(self, rtype: ResourceType, namespace: str | None, name: str) -> Key:
        return (rtype.group, rtype.plural, namespace or "" if rtype.namespaced else "", name)

    def _get(self, target: Target) -> Obj:
        assert target.name is not None
        obj = self.store.get(self.key(target.rtype, target.namespace, target.name))
        if obj is None:
            raise not_found(target.rtype, target.name)
        return obj

    def _out(self, rtype: ResourceType, obj: Obj) -> Obj:
        out = copy.deepcopy(obj)
        out["apiVersion"] = rtype.group_version
        out["kind"] = rtype.kind
        return out

    def _matchers(self, rtype: ResourceType, query: dict[str, str]) -> Callable[[Obj], bool]:
        labels = label_matcher(query.get("labelSelector"))
        allowed = {"metadata.name", "metadata.namespace", *rtype.field_selectors, *rtype.selectable_fields}
        fields = field_matcher(query.get("fieldSelector"), allowed, rtype.kind)
        return lambda obj: labels(obj["metadata"].get("labels") or {}) and fields(obj)

    def list(self, target: Target, query: dict[str, str]) -> Obj:
        rtype = target.rtype
        matches = self._matchers(rtype, query)
        with self.store.lock:
            items = [self._out(rtype, o) for _k, o in self.store.items(rtype.group, rtype.plural, target.namespace)]
            rv = self.store.rv
        items = [o for o in items if matches(o)]
        meta: Obj = {"resourceVersion": str(rv)}
        start = 0
        if query.get("continue"):
            try:
                start = int(base64.b64decode(query["continue"]).decode())
            except ValueError as exc:
                raise ApiError(400, "BadRequest", "invalid continue token") from exc
        limit = int(query.get("limit") or 0)
        if limit > 0:
            if start + limit < len(items):
                meta["continue"] = base64.b64encode(str(start + limit).encode()).decode()
                meta["remainingItemCount"] = len(items) - start - limit
            items = items[start : start + limit]
        return {"kind": f"{rtype.kind}List", "apiVersion": rtype.group_version, "metadata": meta, "items": items}

    def watch(self, target: Target, query: dict[str, str]) -> Response:
        rtype = target.rtype
        matches = self._matchers(rtype, query)
        rv_text = query.get("resourceVersion", "")
        send_initial = rv_text in ("", "0") or query.get("sendInitialEvents") == "true"
        watcher = Watcher(rtype.group, rtype.plural, target.namespace, matches)
        with self.store.lock:
            initial = (
                []
                if not send_initial
                else [self._out(rtype, o) for _k, o in self.store.items(rtype.group, rtype.plural, target.namespace)]
            )
            since = int(rv_text) if rv_text not in ("", "0") else None
            backlog = self.store.subscribe(watcher, since if not send_initial else None)
            current_rv = self.store.rv
        timeout = float(query.get("timeoutSeconds") or 1800)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        return Response(
            200,
            None,
            stream=self._watch_stream(
                watcher=watcher,
                rtype=rtype,
                namespace=target.namespace,
                initial=initial,
                backlog=backlog,
                timeout=timeout,
                bookmarks=bookmarks,
                current_rv=current_rv,
                send_initial=send_initial,
                query=query,
            ),
        )

    def _watch_stream(
        self,
        *,
        watcher: Watcher,
        rtype: ResourceType,
        namespace: str | None,
        initial: list[Obj],
        backlog: list[Event] | None,
        timeout: float,
        bookmarks: bool,
        current_rv: int,
        send_initial: bool,
        query: dict[str, str],
    ) -> Iterator[bytes]:
        def line(event_type: str, obj: Obj) -> bytes:
            return json.dumps({"type": event_type, "object": obj}).encode() + b"\n"

        try:
            if backlog is None:
                gone = ApiError(
                    410,
                    "Expired",
                    f"too old resource version: {query.get('resourceVersion')} ({self.store.compacted_rv})",
                ).status()
                yield line("ERROR", gone)
                return
            for obj in initial:
                if watcher.matches(obj):
                    yield line("ADDED", obj)
            if send_initial and bookmarks and query.get("sendInitialEvents") == "true":
                mark = {
                    "kind": rtype.kind,
                    "apiVersion": rtype.group_version,
                    "metadata": {
                        "resourceVersion": str(current_rv),
                        "annotations": {"k8s.io/initial-events-end": "true"},
                    },
                }
                yield line("BOOKMARK", mark)
            for event in backlog:
                out = self._event_line(watcher, rtype, namespace, event)
                if out:
                    yield line(*out)
            deadline = time.monotonic() + timeout
            while not watcher.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                try:
                    event = watcher.events.get(timeout=min(remaining, 1.0))
                except Exception:  # queue.Empty: loop to re-check the deadline
                    continue
                if event is None:
                    return
                out = self._event_line(watcher, rtype, namespace, event)
                if out:
                    yield line(*out)
        finally:
            self.store.unsubscribe(watcher)

    def _event_line(
        self, watcher: Watcher, rtype: ResourceType, namespace: str | None, event: Event
    ) -> tuple[str, Obj] | None:
        if namespace is not None and event.key[2] != namespace:
            return None
        new = self._out(rtype, event.obj)
        now_match = watcher.matches(new)
        if event.type == "MODIFIED" and event.old is not None:
            old_match = watcher.matches(self._out(rtype, event.old))
            if old_match and not now_match:
                return "DELETED", new
            if now_match and not old_match:
                return "ADDED", new
        return (event.type, new) if now_match else None

    # --- writes ---------------------------------------------------------------------------------

    def _check_body(self, target: Target, obj: Obj) -> None:
        rtype = target.rtype
        if obj.get("kind") not in (None, rtype.kind) or obj.get("apiVersion") not in (None, rtype.group_version):
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({obj.get('apiVersion')}) does not match "
                f"the expected API version ({rtype.group_version}) or kind {obj.get('kind')}",
            )
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        if rtype.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and target.namespace and body_ns != target.namespace:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            meta["namespace"] = target.namespace or body_ns
            if not meta["namespace"]:
                raise ApiError(400, "BadRequest", "the namespace of the object is missing")
        else:
            meta.pop("namespace", None)

    def _admit(self, rtype: ResourceType, obj: Obj, old: Obj | None, query: dict[str, str] | None = None) -> None:
        """Defaulting, pruning, validation: the admission chain of every write."""
        from lab.kube.defaults import apply_defaults, semantic_errors

        obj["apiVersion"], obj["kind"] = rtype.group_version, rtype.kind
        meta = obj["metadata"]
        name = meta.get("name", "")
        causes: list[dict[str, str]] = []
        pattern = DNS_LABEL if rtype.kind == "Namespace" else DNS_SUBDOMAIN
        if not pattern.match(name) or len(name) > (63 if rtype.kind == "Namespace" else 253):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": "metadata.name",
                    "message": f'Invalid value: "{name}": a lowercase RFC 1123 name must consist of lower '
                    "case alphanumeric characters, '-' or '.'",
                }
            )
        for label_key, value in (meta.get("labels") or {}).items():
            if not isinstance(value, str) or not LABEL_VALUE.match(value) or len(value) > 63:
                causes.append(
                    {
                        "reason": "FieldValueInvalid",
                        "field": f"metadata.labels.{label_key}",
                        "message": f'Invalid value: "{value}": a valid label must be 63 characters or less',
                    }
                )
        apply_defaults(rtype, obj, old)
        unknown = schemas.unknown_fields(rtype.object_schema(), obj)
        if unknown and (query or {}).get("fieldValidation") == "Strict":
            detail = ", ".join(f'unknown field "{path}"' for path in unknown)
            raise ApiError(400, "BadRequest", f"strict decoding error: {detail}")
        schemas.drop_paths(obj, unknown)  # Warn/Ignore: pruned, like the apiserver does
        if rtype.crd is not None:
            obj.update(schemas.prune_and_default(rtype.schema, {k: v for k, v in obj.items() if k != "metadata"}))
            if rtype.validator is not None:
                causes += schemas.validate_custom(rtype.validator, obj)
        else:
            causes += schemas.validate_builtin(rtype.group, rtype.version, rtype.kind, obj)
        causes += semantic_errors(rtype, obj, old)
        if causes:
            raise invalid(rtype, name, causes)

    def create(
        self, target: Target, obj: Obj, query: dict[str, str], manager: str, managed: list[Obj] | None = None
    ) -> Response:
        rtype = target.rtype
        self._check_body(target, obj)
        meta = obj["metadata"]
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise invalid(
                    rtype,
                    "",
                    [
                        {
                            "reason": "FieldValueRequired",
                            "field": "metadata.name",
                            "message": "Required value: name or generateName is required",
                        }
                    ],
                )
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if rtype.namespaced:
            self._namespace_open(meta["namespace"])
        with self.store.lock:
            key = self.key(rtype, meta.get("namespace"), meta["name"])
            if self.store.get(key) is not None:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{_gr(rtype)} "{meta["name"]}" already exists',
                    {"name": meta["name"], "group": rtype.group, "kind": rtype.plural},
                )
            if (rtype.status and rtype.kind not in ("Node", "CustomResourceDefinition") and rtype.crd is None) or (
                rtype.crd is not None and rtype.status
            ):
                obj.pop("status", None)
            self._admit(rtype, obj, None, query)
            for server_field in ("resourceVersion", "deletionTimestamp", "managedFields"):
                meta.pop(server_field, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_iso()
            if rtype.group in GENERATION_GROUPS or rtype.crd is not None:
                meta["generation"] = 1
            if managed is not None:
                meta["managedFields"] = managed
            else:
                fields = patching.field_set(patching.strip_server_fields(obj), rtype.object_schema())
                meta["managedFields"] = [self._managed_entry(rtype, manager, "Update", fields)]
            tidy_managed_fields(obj)
            if query.get("dryRun") == "All":  # nothing stored: no resourceVersion, as on kube-apiserver
                return Response(201, self._out(rtype, obj))
            stored = self.store.put(key, obj, "ADDED", None)
            out = self._out(rtype, stored)
        self._after_write(rtype, "ADDED", stored, None)
        return Response(201, out)

    def _namespace_open(self, namespace: str) -> None:
        ns_type = self.types[("", "v1", "namespaces")]
        ns = self.store.get(self.key(ns_type, None, namespace))
        if ns is None:
            raise not_found(ns_type, namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {namespace} because it is being terminated",
                {"name": namespace, "kind": "namespaces"},
            )

    def _managed_entry(
        self, rtype: ResourceType, manager: str, operation: str, fields: set[tuple[str, ...]], sub: str | None = None
    ) -> Obj:
        entry = {
            "manager": manager,
            "operation": operation,
            "apiVersion": rtype.group_version,
            "time": now_iso(),
            "fieldsType": "FieldsV1",
            "fieldsV1": patching.to_fields_v1(fields),
        }
        if sub:
            entry["subresource"] = sub
        return entry

    def _update_managed(self, rtype: ResourceType, old: Obj, new: Obj, manager: str, sub: str | None) -> None:
        changed = (
            patching.changed_fields(old, new, rtype.object_schema())
            if sub is None
            else set(patching.changed_fields({"status": {}}, {"status": new.get("status")}, rtype.object_schema()))
        )
        if sub == "status":
            changed = {
                p
                for p in patching.field_set({"status": new.get("status") or {}}, rtype.object_schema())
                if patching.value_at(old, p) != patching.value_at(new, p)
            }
        entries = list(old["metadata"].get("managedFields") or [])
        result, found = [], False
        for entry in entries:
            paths = patching.from_fields_v1(entry.get("fieldsV1") or {})
            if entry["manager"] == manager and entry["operation"] == "Update" and entry.get("subresource") == sub:
                paths |= changed
                found = True
            else:
                paths -= {p for p in changed if p[-1] != "."}
            if paths:
                result.append({**entry, "fieldsV1": patching.to_fields_v1(paths)})
        if not found and changed:
            result.append(self._managed_entry(rtype, manager, "Update", changed, sub))
        new["metadata"]["managedFields"] = result

    def replace(self, target: Target, obj: Obj, query: dict[str, str], manager: str) -> Response:
        rtype = target.rtype
        self._check_body(target, obj)
        if target.sub == "scale":
            return self._write_scale(target, obj, query, manager)
        if obj["metadata"].get("name") not in (None, target.name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        obj["metadata"]["name"] = target.name
        with self.store.lock:
            old = self._get(target)
            want_rv = obj["metadata"].get("resourceVersion")
            if want_rv and want_rv != old["metadata"]["resourceVersion"]:
                raise conflict(
                    rtype,
                    str(target.name),
                    "the object has been modified; please apply your changes to the latest version and try again",
                )
            if not want_rv and rtype.crd is not None:
                raise invalid(
                    rtype,
                    str(target.name),
                    [
                        {
                            "reason": "FieldValueInvalid",
                            "field": "metadata.resourceVersion",
                            "message": "Invalid value: 0x0: must be specified for an update",
                        }
                    ],
                )
            return self._commit_update(target, old, obj, query, manager)

    def _commit_update(
        self,
        target: Target,
        old: Obj,
        new: Obj,
        query: dict[str, str],
        manager: str,
        *,
        managed: list[Obj] | None = None,
    ) -> Response:
        rtype = target.rtype
        new = copy.deepcopy(new)
        meta, old_meta = new.setdefault("metadata", {}), old["metadata"]
        for fixed in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "namespace",
            "name",
            "generation",
            "deletionGracePeriodSeconds",
        ):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        if target.sub == "status":
            status = new.get("status")
            new = copy.deepcopy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
            meta = new["metadata"]
        elif rtype.status and rtype.kind != "CustomResourceDefinition":
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        self._admit(rtype, new, old, query)
        if meta.get("generation") is not None and target.sub is None:
            strip = ("metadata", "status", "apiVersion", "kind")
            if {k: v for k, v in new.items() if k not in strip} != {k: v for k, v in old.items() if k not in strip}:
                meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if managed is not None:
            meta["managedFields"] = managed
        else:
            meta["managedFields"] = old_meta.get("managedFields") or []
            self._update_managed(rtype, old, new, manager, target.sub)
        tidy_managed_fields(new)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if self._same(new, old):
            return Response(200, self._out(rtype, old))
        if query.get("dryRun") == "All":
            return Response(200, self._out(rtype, new))
        key = self.key(rtype, meta.get("namespace"), meta["name"])
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.store.remove(key)
            self._after_write(rtype, "DELETED", new, old)
            return Response(200, self._out(rtype, new))
        stored = self.store.put(key, new, "MODIFIED", copy.deepcopy(old))
        out = self._out(rtype, stored)
        self._after_write(rtype, "MODIFIED", stored, old)
        return Response(200, out)

    @staticmethod
    def _same(new: Obj, old: Obj) -> bool:
        def norm(o: Obj) -> Obj:
            out = copy.deepcopy(o)
            for entry in out["metadata"].get("managedFields") or []:
                entry.pop("time", None)
            return out

        return norm(new) == norm(old)

    def patch(self, target: Target, request: Request) -> Response:
        rtype = target.rtype
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        manager = self._manager(request)
        if content_type == "application/apply-patch+yaml":
            return self.apply(target, self._body(request, rtype), request.query)
        try:
            body = json.loads(request.body or b"null")
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"invalid patch body: {exc}") from exc
        with self.store.lock:
            old = self._get(target)
            current = self._out(rtype, old)
            if target.sub == "scale":
                scale = self._scale(old)
                patched = patching.merge_patch(scale, body) if isinstance(body, dict) else scale
                return self._write_scale(target, patched, request.query, manager)
            try:
                if content_type == "application/merge-patch+json":
                    new = patching.merge_patch(current, body)
                elif content_type == "application/strategic-merge-patch+json":
                    if rtype.crd is not None:
                        raise ApiError(
                            415,
                            "UnsupportedMediaType",
                            "the body of the request was in an unknown "
                            "format - accepted media types include: application/json-patch+json, "
                            "application/merge-patch+json, application/apply-patch+yaml",
                        )
                    new = patching.strategic_merge(current, body, rtype.object_schema())
                elif content_type == "application/json-patch+json":
                    new = patching.json_patch(current, body)
                else:
                    raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type!r}")
            except patching.PatchError as exc:
                raise ApiError(422, "Invalid", str(exc)) from exc
            if not isinstance(new, dict):
                raise ApiError(422, "Invalid", "patch produced a non-object")
            new_rv = (new.get("metadata") or {}).get("resourceVersion")
            if new_rv and new_rv != old["metadata"]["resourceVersion"]:
                raise conflict(
                    rtype,
                    str(target.name),
                    "the object has been modified; please apply your changes to the latest version and try again",
                )
            self._check_body(target, new)
            return self._commit_update(target, old, new, request.query, manager)

    def apply(self, target: Target, applied: Obj, query: dict[str, str]) -> Response:
        """Server-side apply: create-on-apply, field ownership, conflicts (409 unless force)."""
        rtype = target.rtype
        manager = query.get("fieldManager")
        if not manager:
            raise ApiError(400, "BadRequest", "PATCH, application/apply-patch+yaml requires fieldManager to be set")
        force = query.get("force") == "true"
        self._check_body(target, applied)
        if applied["metadata"].get("name") not in (None, target.name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        applied["metadata"]["name"] = target.name
        schema = rtype.object_schema()
        if target.sub == "status":
            applied_fields = {p for p in patching.field_set(applied, schema, apply=True) if p[0] == "f:status"}
        else:
            applied = {k: v for k, v in applied.items() if k != "status"}
            applied_fields = patching.field_set(applied, schema, apply=True)
        with self.store.lock:
            old = self.store.get(self.key(rtype, applied["metadata"].get("namespace"), str(target.name)))
            if old is None:
                if target.sub:
                    raise not_found(rtype, str(target.name))
                entry = self._managed_entry(rtype, manager, "Apply", applied_fields)
                return self.create(
                    Target(rtype, target.namespace, None, None), copy.deepcopy(applied), query, manager, managed=[entry]
                )
            entries = [dict(e) for e in old["metadata"].get("managedFields") or []]
            owned = {i: patching.from_fields_v1(e.get("fieldsV1") or {}) for i, e in enumerate(entries)}
            mine = next(
                (
                    i
                    for i, e in enumerate(entries)
                    if e["manager"] == manager and e["operation"] == "Apply" and e.get("subresource") == target.sub
                ),
                None,
            )
            conflicts = []
            for index, paths in owned.items():
                if index == mine:
                    continue
                for path in sorted(paths & applied_fields):
                    if path[-1] == ".":
                        continue
                    if patching.value_at(old, path) != patching.value_at(applied, path):
                        conflicts.append((index, path))
            if conflicts and not force:
                causes = [
                    {
                        "reason": "FieldManagerConflict",
                        "field": _field_text(p),
                        "message": f'conflict with "{entries[i]["manager"]}"'
                        + (" using " + entries[i]["apiVersion"] if entries[i]["operation"] == "Update" else ""),
                    }
                    for i, p in conflicts
                ]
                text = "; ".join(f"{c['message']}: {c['field']}" for c in causes)
                raise ApiError(
                    409,
                    "Conflict",
                    f"Apply failed with {len(causes)} conflict(s): {text}",
                    {"name": target.name, "group": rtype.group, "kind": rtype.plural, "causes": causes},
                )
            for index, path in conflicts:
                owned[index].discard(path)
            new = patching.apply_merge(copy.deepcopy(old), applied, schema)
            previous = owned.get(mine, set()) if mine is not None else set()
            others = set().union(*[p for i, p in owned.items() if i != mine]) if owned else set()
            for path in sorted(previous - applied_fields, key=len, reverse=True):
                if path not in others and path[-1] != ".":
                    patching.remove_path(new, path)
            result = []
            for index, entry in enumerate(entries):
                if index == mine:
                    continue
                if owned[index]:
                    result.append({**entry, "fieldsV1": patching.to_fields_v1(owned[index])})
            mine_entry = self._managed_entry(rtype, manager, "Apply", applied_fields, target.sub)
            result.insert(mine if mine is not None else len(result), mine_entry)
            if not force and mine is not None and entries[mine].get("fieldsV1") == mine_entry["fieldsV1"]:
                mine_entry["time"] = entries[mine].get("time", mine_entry["time"])
            return self._commit_update(target, old, new, query, manager, managed=result)

    def _scale(self, obj: Obj) -> Obj:
        meta = obj["metadata"]
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
            },
            "spec": {"replicas": obj.get("spec", {}).get("replicas", 0)},
            "status": {"replicas": obj.get("status", {}).get("replicas", 0)},
        }

    def _write_scale(self, target: Target, scale: Obj, query: dict[str, str], manager: str) -> Response:
        with self.store.lock:
            old = self._get(target)
            new = copy.deepcopy(old)
            new.setdefault("spec", {})["replicas"] = int((scale.get("spec") or {}).get("replicas", 0))
            self._commit_update(Target(target.rtype, target.namespace, target.name, None), old, new, query, manager)
            return Response(200, self._scale(self._get(target)))

    def delete(self, target: Target, options: Obj) -> Response:
        rtype = target.rtype
        with self.store.lock:
            old = self._get(target)
            pre = options.get("preconditions") or {}
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise conflict(rtype, str(target.name), "the ResourceVersion in the precondition does not match")
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise conflict(rtype, str(target.name), "the UID in the precondition does not match")
            dry_run = options.get("dryRun") in ("All", ["All"])
            policy = options.get("propagationPolicy") or ("Orphan" if options.get("orphanDependents") else None)
            new = copy.deepcopy(old)
            meta = new["metadata"]
            finalizers = list(meta.get("finalizers") or [])
            if rtype.kind == "Namespace":
                new.setdefault("spec", {})["finalizers"] = ["kubernetes"]
                new.setdefault("status", {})["phase"] = "Terminating"
            elif rtype.kind == "CustomResourceDefinition" and CRD_CLEANUP_FINALIZER not in finalizers:
                finalizers.append(CRD_CLEANUP_FINALIZER)
            if policy == "Foreground" and "foregroundDeletion" not in finalizers and self._has_dependents(old):
                finalizers.append("foregroundDeletion")
            if policy == "Orphan" and not dry_run:
                self._orphan_dependents(old)
            key = self.key(rtype, meta.get("namespace"), meta["name"])
            if finalizers or rtype.kind == "Namespace":
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = now_iso()
                    meta["deletionGracePeriodSeconds"] = 0
                if finalizers:
                    meta["finalizers"] = finalizers
                if dry_run:
                    return Response(200, self._out(rtype, new))
                if new != old:
                    self.store.put(key, new, "MODIFIED", copy.deepcopy(old))
                    self._after_write(rtype, "MODIFIED", new, old)
                return Response(200, self._out(rtype, new))
            if dry_run:
                return Response(200, self._deleted_status(rtype, old))
            self.store.remove(key)
        self._after_write(rtype, "DELETED", old, old)
        if rtype.kind == "Pod":
            return Response(200, self._out(rtype, old))
        return Response(200, self._deleted_status(rtype, old))

    @staticmethod
    def _deleted_status(rtype: ResourceType, obj: Obj) -> Obj:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": obj["metadata"]["name"],
                "group": rtype.group,
                "kind": rtype.plural,
                "uid": obj["metadata"]["uid"],
            },
        }

    def delete_collection(self, target: Target, query: dict[str, str]) -> Obj:
        listed = self.list(target, query)
        for item in listed["items"]:
            meta = item["metadata"]
            self.delete(
                Target(target.rtype, meta.get("namespace"), meta["name"], None), {"dryRun": query.get("dryRun")}
            )
        return listed

    def dependents(self, owner: Obj) -> list[tuple[ResourceType, Obj]]:
        uid = owner["metadata"].get("uid")
        out = []
        with self.store.lock:
            by_plural = {(t.group, t.plural): t for t in self.types.values()}
            for key, obj in list(self.store.objects.items()):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(r.get("uid") == uid for r in refs) and (key[0], key[1]) in by_plural:
                    out.append((by_plural[(key[0], key[1])], obj))
        return out

    def _has_dependents(self, owner: Obj) -> bool:
        return bool(self.dependents(owner))

    def _orphan_dependents(self, owner: Obj) -> None:
        uid = owner["metadata"].get("uid")
        for rtype, obj in self.dependents(owner):
            new = copy.deepcopy(obj)
            new["metadata"]["ownerReferences"] = [r for r in obj["metadata"]["ownerReferences"] if r.get("uid") != uid]
            if not new["metadata"]["ownerReferences"]:
                del new["metadata"]["ownerReferences"]
            key = self.key(rtype, obj["metadata"].get("namespace"), obj["metadata"]["name"])
            self.store.put(key, new, "MODIFIED", copy.deepcopy(obj))

    def _after_write(self, rtype: ResourceType, event_type: str, obj: Obj, old: Obj | None) -> None:
        for hook in self.on_write:
            hook(rtype, event_type, obj, old)

    # --- OpenAPI v3 -----------------------------------------------------------------------------

    def _openapi(self, path: str) -> Response:
        gvs: dict[str, tuple[str, str]] = {}
        for rtype in self._visible():
            prefix = "api/v1" if not rtype.group else f"apis/{rtype.group}/{rtype.version}"
            gvs[prefix] = (rtype.group, rtype.version)
        if path == "/openapi/v3":
            index = {
                gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={self._openapi_hash(*g)}"} for gv, g in gvs.items()
            }
            return Response(200, {"paths": index})
        gv = path[len("/openapi/v3/") :]
        if gv not in gvs:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return Response(200, self._openapi_text(*gvs[gv]), headers={"Cache-Control": "no-cache"})

    def _crd_openapi(self, group: str, version: str) -> dict[str, schemas.Schema]:
        out = {}
        for rtype in self.types.values():
            if rtype.crd is not None and rtype.group == group and rtype.version == version:
                schema = copy.deepcopy(rtype.schema or {"type": "object"})
                schema["x-kubernetes-group-version-kind"] = [{"group": group, "version": version, "kind": rtype.kind}]
                out[f"{'.'.join(reversed(group.split('.')))}.{version}.{rtype.kind}"] = schema
        return out

    def _openapi_paths(self, group: str, version: str) -> dict[str, Any]:
        """Operations per resource; client-go's QueryParamVerifierV3 looks for a PATCH operation with
        this GVK and a ``fieldValidation`` query parameter before it trusts server-side validation
        (otherwise kubectl and helm fall back to OpenAPI v2 client-side validation)."""
        query = [
            {"name": n, "in": "query", "schema": {"type": "string"}}
            for n in ("dryRun", "fieldManager", "fieldValidation")
        ]
        paths: dict[str, Any] = {}
        for rtype in self.types.values():
            if rtype.group != group or rtype.version != version:
                continue
            gvk = {"group": group, "version": version, "kind": rtype.kind}
            collection = self.path_for(rtype, "{namespace}" if rtype.namespaced else None)
            path_params = [{"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}]

            paths[collection] = {
                "get": _operation("list", [], gvk),
                "post": _operation("post", query, gvk),
                "parameters": path_params if rtype.namespaced else [],
            }
            item_params = [
                *(path_params if rtype.namespaced else []),
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
            ]
            paths[collection + "/{name}"] = {
                "get": _operation("get", [], gvk),
                "put": _operation("put", query, gvk),
                "delete": _operation("delete", query[:1], gvk),
                "patch": _operation(
                    "patch", [*query, {"name": "force", "in": "query", "schema": {"type": "boolean"}}], gvk
                ),
                "parameters": item_params,
            }
        return paths

    def _openapi_hash(self, group: str, version: str) -> str:
        return schemas.content_hash([self._crd_openapi(group, version), self._openapi_paths(group, version)])

    _openapi_cache: dict[str, bytes] = {}

    def _openapi_text(self, group: str, version: str) -> bytes:
        extra = self._crd_openapi(group, version)
        paths = self._openapi_paths(group, version)
        cache_key = f"{group}/{version}/{schemas.content_hash([extra, paths])}"
        if cache_key not in self._openapi_cache:
            doc = schemas.openapi_document(group, version, extra)
            doc["paths"] = paths
            self._openapi_cache[cache_key] = json.dumps(doc).encode()
        return self._openapi_cache[cache_key]


def _field_text(path: tuple[str, ...]) -> str:
    out = ""
    for element in path:
        if element.startswith("f:"):
            out += "." + element[2:]
        elif element.startswith("k:") or element.startswith("v:"):
            out += "[" + element[2:] + "]"
    return out


def _operation(action: str, params: list[dict[str, Any]], gvk: dict[str, str]) -> dict[str, Any]:
    """One OpenAPI v3 operation carrying the GVK extension client-go looks for."""
    return {
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
    }
