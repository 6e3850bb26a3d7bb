# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One Kubernetes API client per module run: configuration, discovery, list and raw watch streams.

Why: readiness waits need list + watch on arbitrary kinds (CRDs included), so the client is the
kubernetes library's ``DynamicClient`` over a single ``ApiClient``. Configuration follows
kubernetes.core (``host`` + ``api_key`` skip the kubeconfig; otherwise kubeconfig/context, else
in-cluster). Discovery is cached in a private temporary directory that lives for one run: the
library's default cache in the system temp directory is keyed by host and goes stale when a test
server (or a rebuilt cluster) reuses a host:port (kubernetes-client/python ``kubernetes/dynamic/discovery.py``
names it ``osrcp-<md5 of the host>.json`` in ``tempfile.gettempdir()``). A kind missing from
discovery is looked up again after invalidating the cache, because a new CRD reaches discovery a
moment after it is Established.

Watches are read as raw JSON lines (``_preload_content=False``) rather than through
``kubernetes.watch.Watch``: the caller needs the ``resourceVersion`` of BOOKMARKs, the 410 ERROR
event as a value (to re-list), and a read timeout tied to the wait's deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Iterator
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.api_retries import record_retry
from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    InputError,
    NotFoundError,
)

# kubernetes.dynamic imports kubernetes-validate when it is installed (kubernetes.core's `validate` option wants it),
# and with it pydantic and jsonschema: about a third of the client's import, 0.1 to 0.15 CPU second in every module run
# that talks to a Kubernetes API, for DynamicClient.validate(), which this collection never calls. While the client is
# imported here, kubernetes-validate reads as not installed; afterwards it imports as usual for anyone else.
_VALIDATE_MODULE = "kubernetes_validate"
_hidden_validate = _VALIDATE_MODULE not in sys.modules
if _hidden_validate:
    sys.modules[_VALIDATE_MODULE] = None  # type: ignore[assignment]  # an import of it raises ImportError
try:
    import kubernetes
    import urllib3
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError

    KUBERNETES_IMPORT_ERROR: str | None = None
except ImportError:
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
finally:
    if _hidden_validate and sys.modules.get(_VALIDATE_MODULE, False) is None:
        del sys.modules[_VALIDATE_MODULE]

# HTTP statuses after which a list/watch is simply retried (server busy, restarting, or a
# resourceVersion too old to resume from, which calls for a fresh list).
TRANSIENT_STATUSES = frozenset({408, 410, 429, 500, 502, 503, 504})
# Seconds allowed to open a TCP/TLS connection; reads get the wait's remaining time instead.
CONNECT_TIMEOUT = 5.0
# client-go's rule for an answer that asks to be asked again (k8s.io/client-go/rest, request.go ``checkWait`` and
# with_retry.go ``IsNextRetry``): a 429 or any 5xx carrying Retry-After is sent again after that many seconds, whatever
# its verb (the server declined it before acting: kube-apiserver's priority and fairness answers 429 so, and so does
# an apiserver shutting down), at most 10 times. Helm and kubectl behave so; the kubernetes Python library by itself
# retries only reads, three times. A 5xx without Retry-After may have been acted on and is the caller's to judge.
RETRY_AFTER_RETRIES = 10
# The longest Retry-After honoured, in seconds (a larger one is waited this long).
RETRY_AFTER_MAX = 30.0
# Connection and read failures keep urllib3's default allowance (connections are retried, reads only when idempotent).
TRANSPORT_RETRIES = 3


class TransientApiError(ApiError):
    """The API server could not answer now (down, 5xx, 429, 410); the caller retries until its deadline."""

    kind = "api_transient"


class KindNotServed(NotFoundError):
    """``api_version``/``kind`` is not (yet) in the server's discovery documents."""

    kind = "kind_not_served"


def forget_parents_temp_files() -> None:
    """In a forked process that outlives its parent: stop using the parent's kubeconfig certificate files.

    The kubernetes library writes a kubeconfig's embedded certificates to temporary files, caches their paths per
    content, and deletes them when the process that wrote them exits. A child forked after that would reuse the
    cached paths after its parent removed the files (``[Errno 2]`` on its first request); with the cache emptied
    it writes its own.
    """
    from kubernetes.config import kube_config

    kube_config._temp_files = {}


def remove_temp_files() -> None:
    """Delete the certificate files this process wrote (what the library's ``atexit`` hook would do)."""
    from kubernetes.config import kube_config

    kube_config._cleanup_temp_files()


def retry_policy() -> Any:
    """A ``urllib3.Retry`` that follows client-go's rule for Retry-After answers and counts what it retries."""

    class RetryAfterAnswers(urllib3.util.Retry):
        def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
            return bool(self.total and has_retry_after and (status_code == 429 or status_code >= 500))

        def parse_retry_after(self, retry_after: str) -> float:
            return min(float(super().parse_retry_after(retry_after)), RETRY_AFTER_MAX)

        def increment(self, *args: Any, **kwargs: Any) -> Any:
            following = super().increment(*args, **kwargs)
            response = kwargs.get("response")
            if kwargs.get("error") is None and response is not None and self.is_retry("", response.status, True):
                record_retry()
            return following

    return RetryAfterAnswers(
        total=RETRY_AFTER_RETRIES + TRANSPORT_RETRIES,
        connect=TRANSPORT_RETRIES,
        read=TRANSPORT_RETRIES,
        redirect=TRANSPORT_RETRIES,
        status=RETRY_AFTER_RETRIES,
        backoff_factor=0,
        # The last answer goes to the caller as an answer (translated to TransientApiError), not as MaxRetryError.
        raise_on_status=False,
    )


def build_configuration(auth: dict[str, Any]) -> Any:
    """A ``kubernetes.client.Configuration`` from resolved options (see ``args.resolve_auth``)."""
    configuration = kubernetes.client.Configuration()
    have_direct = bool(auth.get("host")) and (
        bool(auth.get("api_key")) or (bool(auth.get("client_cert")) and bool(auth.get("client_key")))
    )
    if not have_direct:
        _load_kubeconfig(auth, configuration)
    overrides = _overrides(auth)
    _apply_overrides(configuration, overrides)
    # The kubeconfig loader installs a hook that re-applies the kubeconfig's token, host and TLS
    # settings before every request (for expiring tokens); re-apply the options after it, or
    # they would be silently undone on the first call.
    loader_hook = configuration.refresh_api_key_hook
    if loader_hook is not None and overrides:

        def _refresh(config: Any) -> None:
            loader_hook(config)
            _apply_overrides(config, overrides)

        configuration.refresh_api_key_hook = _refresh
    configuration.retries = retry_policy()
    return configuration


def _overrides(auth: dict[str, Any]) -> dict[str, Any]:
    """Configuration attributes that the module options force, whatever the kubeconfig says."""
    overrides: dict[str, Any] = {}
    if auth.get("host"):
        overrides["host"] = str(auth["host"]).rstrip("/")
    if auth.get("api_key"):
        # "BearerToken" is read by kubernetes >= 32, "authorization" by older clients.
        bearer = f"Bearer {auth['api_key']}"
        overrides["api_key"] = {"BearerToken": bearer, "authorization": bearer}
    if auth.get("validate_certs") is not None:
        overrides["verify_ssl"] = bool(auth["validate_certs"])
    for option, attribute in (
        ("ca_cert", "ssl_ca_cert"),
        ("client_cert", "cert_file"),
        ("client_key", "key_file"),
        ("proxy", "proxy"),
        ("no_proxy", "no_proxy"),
    ):
        if auth.get(option):
            overrides[attribute] = auth[option]
    return overrides


def _apply_overrides(configuration: Any, overrides: dict[str, Any]) -> None:
    for attribute, value in overrides.items():
        setattr(configuration, attribute, dict(value) if isinstance(value, dict) else value)


def _load_kubeconfig(auth: dict[str, Any], configuration: Any) -> None:
    kubeconfig = auth.get("kubeconfig")
    context = auth.get("context")
    if isinstance(kubeconfig, str) and kubeconfig and not os.path.isfile(os.path.expanduser(kubeconfig)):
        # Said plainly, naming the option: the client library's own words for it are "No configuration found".
        raise InputError(
            "kubeconfig", f"{kubeconfig!r} is not a file; give the path of a kubeconfig (or its content as a mapping)"
        )
    try:
        if isinstance(kubeconfig, dict):
            kubernetes.config.load_kube_config_from_dict(
                config_dict=kubeconfig, context=context, client_configuration=configuration
            )
        elif kubeconfig or context:
            kubernetes.config.load_kube_config(
                config_file=kubeconfig or None, context=context, client_configuration=configuration
            )
        else:
            try:
                kubernetes.config.load_incluster_config(client_configuration=configuration)
            except ConfigException:
                kubernetes.config.load_kube_config(client_configuration=configuration)
    except (ConfigException, OSError, TypeError, ValueError) as exc:
        # The message names the file/context problem; it never carries the kubeconfig's secrets.
        raise ApiError(f"Cannot load Kubernetes configuration: {exc}", details={"context": context}) from None


def _status_message(exc: Exception) -> tuple[int | None, str]:
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    message = getattr(exc, "reason", None) or str(exc)
    if body:
        with contextlib.suppress(TypeError, ValueError, AttributeError):
            message = json.loads(body).get("message") or message
    return (int(status) if isinstance(status, int) else None), str(message)


# What OpenSSL says when the server's certificate does not chain to a trusted CA (wrapped by urllib3's errors).
CERTIFICATE_FAILED = "CERTIFICATE_VERIFY_FAILED"


def translate(exc: Exception, what: str) -> ApiError:
    """Map a library/transport exception to a transient or final ``ApiError``."""
    status, message = _status_message(exc)
    if status is None and CERTIFICATE_FAILED in str(exc):
        # Final, not transient: waiting does not make a certificate trusted. Say which option trusts it.
        return ApiError(
            f"{what}: the API server's TLS certificate is not trusted ({CERTIFICATE_FAILED}): give its CA in the "
            "kubeconfig (certificate-authority or certificate-authority-data) or, where the module has it, with "
            "ca_cert; validate_certs: false only for a throwaway lab"
        )
    if status is None or status in TRANSIENT_STATUSES:
        return TransientApiError(f"{what}: {message}", status=status)
    return ApiError(f"{what}: HTTP {status}: {message}", status=status)


def _transport_errors() -> tuple[type[BaseException], ...]:
    return (ApiException, DynamicApiError, urllib3.exceptions.HTTPError, OSError)


class KubeClient:
    """One ``ApiClient`` and one lazily discovering ``DynamicClient`` for the whole run."""

    def __init__(self, configuration: Any) -> None:
        self.api_client = kubernetes.client.ApiClient(configuration)
        self._cache_dir = tempfile.mkdtemp(prefix="mp-kube-discovery-")
        self._dynamic: Any = None

    @classmethod
    def from_auth(cls, auth: dict[str, Any]) -> KubeClient:
        return cls(build_configuration(auth))

    def close(self) -> None:
        shutil.rmtree(self._cache_dir, ignore_errors=True)
        with contextlib.suppress(Exception):
            self.api_client.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def dynamic(self) -> Any:
        if self._dynamic is None:
            try:
                self._dynamic = DynamicClient(self.api_client, cache_file=f"{self._cache_dir}/discovery.json")
            except _transport_errors() as exc:
                raise translate(exc, "API discovery failed") from None
        return self._dynamic

    def resource(self, api_version: str, kind: str) -> Any:
        """The discovered resource; the discovery cache is refreshed once before giving up."""
        dynamic = self.dynamic
        for attempt in range(2):
            try:
                return dynamic.resources.get(api_version=api_version, kind=kind)
            except ResourceNotFoundError:
                if attempt == 0:
                    try:
                        dynamic.resources.invalidate_cache()
                    except _transport_errors() as exc:
                        raise translate(exc, "API discovery failed") from None
            except _transport_errors() as exc:
                raise translate(exc, "API discovery failed") from None
        raise KindNotServed(
            f"The API server does not serve kind {kind!r} in {api_version!r}",
            details={"api_version": api_version, "kind": kind},
        )

    def list(
        self,
        resource: Any,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        request_timeout: float | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """All matching objects as dicts, and the list's ``resourceVersion`` to watch from."""
        path = resource.path(namespace=namespace) if resource.namespaced else resource.path()
        try:
            response = self.dynamic.request(
                "get",
                path,
                label_selector=label_selector,
                field_selector=field_selector,
                serialize=False,
                _request_timeout=(CONNECT_TIMEOUT, request_timeout) if request_timeout else None,
            )
            document = json.loads(response.data.decode("utf-8"))
        except _transport_errors() as exc:
            raise translate(exc, f"Listing {resource.kind}") from None
        except ValueError as exc:
            raise TransientApiError(f"Listing {resource.kind}: unreadable answer ({exc})") from None
        items = document.get("items") or []
        for item in items:
            # List items omit apiVersion/kind; put them back so expressions see whole objects.
            item.setdefault("apiVersion", resource.group_version)
            item.setdefault("kind", resource.kind)
        return items, str((document.get("metadata") or {}).get("resourceVersion") or "")

    def open_watch(
        self,
        resource: Any,
        *,
        resource_version: str,
        timeout_seconds: int,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Any:
        """Open a watch stream (a urllib3 response); read it with ``watch_events``."""
        path = resource.path(namespace=namespace) if resource.namespaced else resource.path()
        try:
            return self.dynamic.request(
                "get",
                path,
                watch=True,
                resource_version=resource_version or None,
                allow_watch_bookmarks=True,
                timeout_seconds=max(1, int(timeout_seconds)),
                label_selector=label_selector,
                field_selector=field_selector,
                serialize=False,
                _preload_content=False,
                # The server ends the stream after timeoutSeconds; the read timeout is a safety net.
                _request_timeout=(CONNECT_TIMEOUT, timeout_seconds + CONNECT_TIMEOUT),
            )
        except _transport_errors() as exc:
            raise translate(exc, f"Watching {resource.kind}") from None


def watch_events(response: Any) -> Iterator[dict[str, Any]]:
    """Decode a watch stream's JSON lines; transport failures become ``TransientApiError``."""
    buffer = b""
    try:
        for chunk in response.stream(amt=None, decode_content=False):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)
        if buffer.strip():
            yield json.loads(buffer)
    except _transport_errors() as exc:
        raise TransientApiError(f"Watch stream broke: {exc.__class__.__name__}") from None
    except ValueError as exc:
        raise TransientApiError(f"Watch stream sent an unreadable event ({exc})") from None
