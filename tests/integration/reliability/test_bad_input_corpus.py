"""Every case of the bad-input corpus through ansible-playbook against the lab: refused, field named, nothing written.

One playbook runs every case as its own task (``ignore_errors``), against the Vultr emulator (Vultr's OpenAPI
contract on), the Modelplane control plane's Kubernetes API and an iDRAC8. Then, per case: the task failed, the
refusal names the case's field (and shows its value or rule where the case says so); and for the whole run, from
the emulators' own logs: no write request reached Vultr, no object was written to the Kubernetes API, no write
reached the BMC and its power and boot settings are unchanged. The figure (cases, refused, named, writes) is what
docs/reliability.md reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from integration.reliability.bad_input_corpus import CASES, Case, Lab

from lab.modelplane.server import ModelplaneEmulator
from lab.redfish.personality import LAB_PASSWORD, LAB_USERNAME
from lab.redfish.server import BmcSpec, RedfishLab
from lab.vultr.contract import assert_no_violations, contract_or_skip
from lab.vultr.server import VultrEmulator
from support.figures import record
from support.playbook import run_playbook

API_KEY = "lab-vultr-api-key-corpus"
BMC = "r730-corpus"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


class Writes:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, *_args: Any) -> None:
        self.count += 1


def names(named: Any, field: str) -> bool:
    """Whether the refusal's field is ``field`` or one inside it (``labels`` named as ``labels.bad key``)."""
    return isinstance(named, str) and (named == field or named.startswith((f"{field}.", f"{field}[")))


def refusal(case: Case, result: dict[str, Any]) -> str | None:
    """Why ``result`` is not the refusal ``case`` expects, or None when it is."""
    if not result.get("failed"):
        return "accepted (the task did not fail)"
    msg = str(result.get("msg") or "")
    error = result.get("error") or {}
    fields = [error.get("field"), *(p.get("field") for p in error.get("problems") or [])]
    ours = any(names(f, case.field) for f in fields)
    # Ansible's own argument validation (types, choices, required) has no error.field; it names the option in its
    # sentence ("value of state must be one of: ...").
    ansibles = not error and case.field.rsplit(".", 1)[-1] in msg
    if not ours and not ansibles:
        return f"refused, but not on {case.field!r}: fields {fields}, msg {msg[:300]!r}"
    if case.shows is not None and case.shows not in msg:
        return f"refused on {case.field!r}, but the message does not show {case.shows!r}: {msg[:300]!r}"
    return None


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("corpus")
    with (
        VultrEmulator(delay_scale=0.0, api_key=API_KEY, contract=contract_or_skip(), twin=True) as vultr,
        ModelplaneEmulator(delay_scale=0.0) as mp,
        RedfishLab([BmcSpec(name=BMC, personality="idrac8")], delay_scale=0.0, state_dir=tmp) as redfish,
    ):
        kube_writes = Writes()
        mp.api.server_api.on_write.append(kube_writes)
        bmc = redfish.bmc(BMC)
        before = (bmc.power_state, json.dumps(bmc.snapshot().get("boot"), sort_keys=True, default=str))
        lab = Lab(
            vultr_endpoint=vultr.endpoint,
            vultr_key=API_KEY,
            kubeconfig=str(mp.kubeconfig_path),
            bmc_url=redfish.url(BMC),
            bmc_username=LAB_USERNAME,
            bmc_password=LAB_PASSWORD,
            bmc_ca=redfish.ca_path,
            tmp=str(tmp),
        )
        tasks = [
            {"name": case.id, f"metalplane.inference.{case.module}": case.options(lab), "ignore_errors": True}
            for case in CASES
        ]
        run = run_playbook(tasks, env={"TMPDIR": str(tmp)}, timeout=900)
        yield {
            "run": run,
            "vultr_writes": sum(vultr.request_count(method=m) for m in WRITES),
            "kube_writes": kube_writes.count,
            "bmc_writes": [r for r in bmc.requests if r.method in WRITES],
            "bmc_before": before,
            "bmc_after": (bmc.power_state, json.dumps(bmc.snapshot().get("boot"), sort_keys=True, default=str)),
            "secret": LAB_PASSWORD,
        }
        assert_no_violations(vultr)


def test_the_corpus_is_large_and_spans_every_platform() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    modules = {c.module for c in CASES}
    assert {
        "vke_cluster",
        "vke_node_pool",
        "redfish_power",
        "modelplane_cluster",
        "host_claim",
        "metal3_host",
    } <= modules


def test_every_bad_input_is_refused_naming_its_field(corpus_run: dict[str, Any]) -> None:
    run = corpus_run["run"]
    assert run.report, run.stdout[-3000:] + run.stderr[-3000:]
    wrong = {}
    for case in CASES:
        try:
            result = run.task(case.id)
        except KeyError:
            wrong[case.id] = "did not run"
            continue
        why = refusal(case, result)
        if why is not None:
            wrong[case.id] = why
    record(
        "bad_input",
        {
            "cases": len(CASES),
            "refused naming the field": len(CASES) - len(wrong),
            "modules": len({c.module for c in CASES}),
            "writes (Vultr, Kubernetes, BMC)": [
                corpus_run["vultr_writes"],
                corpus_run["kube_writes"],
                len(corpus_run["bmc_writes"]),
            ],
        },
        "the corpus in tests/integration/reliability/bad_input_corpus.py, one task per case through ansible-playbook "
        "against the lab; writes are the emulators' own request logs",
    )
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())


def test_nothing_was_written_anywhere(corpus_run: dict[str, Any]) -> None:
    assert corpus_run["vultr_writes"] == 0
    assert corpus_run["kube_writes"] == 0
    assert corpus_run["bmc_writes"] == []
    assert corpus_run["bmc_after"] == corpus_run["bmc_before"]
    assert corpus_run["secret"] not in corpus_run["run"].stdout
