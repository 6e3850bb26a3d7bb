"""The Kubernetes client's Retry-After rule against the lab API server (client-go's, ``_kube/client.retry_policy``).

Why: a busy or restarting apiserver answers 429 or 503 with ``Retry-After``, meaning "not done, ask again"; client-go
(Helm, kubectl) asks again for every verb, while the kubernetes Python library alone retries only reads. Each row: the
answers the server gives first, the verb, and whether the request then succeeds, with how many requests the server saw
and how many retries the module run reports.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common import api_retries
from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import (
    RETRY_AFTER_RETRIES,
    KubeClient,
    TransientApiError,
    translate,
)
from lab.kube.server import KubeEmulator

pytest.importorskip("kubernetes")

pytestmark = pytest.mark.emulator_only


@pytest.fixture(scope="module")
def server() -> Iterator[KubeEmulator]:
    with KubeEmulator(delay_scale=0.0, name="retry") as emulator:
        yield emulator


def create_config_map(client: KubeClient) -> None:
    resource = client.resource("v1", "ConfigMap")
    name = f"retry-{uuid.uuid4().hex[:8]}"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}
    try:
        client.dynamic.create(resource, body=body, namespace="default")
    except Exception as exc:  # what the modules do: translate, then decide
        raise translate(exc, "Creating") from None


def list_config_maps(client: KubeClient) -> None:
    client.list(client.resource("v1", "ConfigMap"), namespace="default")


@dataclass(frozen=True)
class Case:
    name: str
    failures: int  # answers before the real one
    status: int
    retry_after: int | None
    call: Callable[[KubeClient], None]
    retried: bool  # the call then succeeds


CASES = [
    Case("POST after a 429 with Retry-After", 2, 429, 0, create_config_map, True),
    Case("POST after a 503 with Retry-After", 1, 503, 0, create_config_map, True),
    Case("GET after a 500 with Retry-After", 1, 500, 0, list_config_maps, True),
    Case("POST after a 500 without Retry-After: maybe acted on, not repeated", 1, 500, None, create_config_map, False),
    Case("GET after a 503 without Retry-After: the caller's wait decides", 1, 503, None, list_config_maps, False),
    Case("more Retry-After answers than the allowance", RETRY_AFTER_RETRIES + 1, 429, 0, list_config_maps, False),
]


@pytest.mark.parametrize("case", [pytest.param(case, id=case.name) for case in CASES])
def test_retry_after_answers_are_asked_again_for_every_verb(server: KubeEmulator, case: Case) -> None:
    with KubeClient.from_auth({"kubeconfig": str(server.kubeconfig_path)}) as client:
        client.resource("v1", "ConfigMap")  # discovery first, outside the counted window
        seen, before = len(server.requests), api_retries.taken()
        server.fail_next(case.failures, case.status, retry_after=case.retry_after)
        if case.retried:
            case.call(client)
        else:
            with pytest.raises(TransientApiError) as raised:
                case.call(client)
            assert raised.value.status == case.status
        server.fail_next(0)
    sent = len(server.requests) - seen
    asked_again = api_retries.taken() - before
    if case.retried:
        assert (sent, asked_again) == (case.failures + 1, case.failures)
    elif case.retry_after is None:
        assert (sent, asked_again) == (1, 0)
    else:
        assert (sent, asked_again) == (RETRY_AFTER_RETRIES + 1, RETRY_AFTER_RETRIES)
