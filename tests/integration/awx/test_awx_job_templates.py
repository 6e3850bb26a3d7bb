"""The AWX job templates of playbooks/awx/vars/objects.yml, launched through ansible-runner against the lab.

Why: no AWX controller runs here, so these tests prove the part AWX does not change: each job template's playbook,
given exactly what its credential types inject (environment variables, a 0600 kubeconfig file) and what its
survey passes, converges the lab; and nothing secret reaches what AWX keeps of a job (job events, stdout, the
runner's artifacts). ``support.awx`` reproduces AWX's injection from its source. The inventory carries no secret
of its own, as in AWX: the Vultr key and the control plane's kubeconfig come only from the credentials.

Not proven here, and said in docs/awx.md: the AWX API accepting the objects (configure.yml is checked against
awx.awx's own argument validation, in test_awx_configure.py), the container image, job slicing's host split.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.reliability.vke_lab import VkeLab, VkeLabContext

from support.awx import Credential, Job, check_survey, job_template, launch
from support.collection import ensure_collection_tree

REPO = Path(__file__).resolve().parents[3]
LAB_INVENTORY = REPO / "inventories" / "lab"
CLUSTER = "lab-ewr-1"
# Recognisable secrets: found anywhere AWX keeps, they are a leak.
VULTR_KEY = "awx-vultr-key-5f0d2c9e-not-in-artifacts"
MODELPLANE_TOKEN = "awx-modelplane-token-8b41e7a3-not-in-artifacts"
PREFLIGHT = "Check every cluster against the inventory rules and the Vultr account (read-only)"


@pytest.fixture
def lab(ansible_tmp: Path) -> Iterator[VkeLab]:
    with VkeLabContext(ansible_tmp, ansible_tmp, api_key=VULTR_KEY, token=MODELPLANE_TOKEN) as twin:
        yield twin


def awx_inventory(tmp: Path) -> Path:
    """inventories/lab as an AWX project inventory: the VKE cluster only (this lab has no BMCs), and no credential:
    the Vultr key falls back to VULTR_API_KEY and the control plane's kubeconfig is MODELPLANE_KUBECONFIG's, as in
    inventories/examples/vultr."""
    inventory = tmp / "inventory"
    shutil.copytree(LAB_INVENTORY / "group_vars", inventory / "group_vars")
    hosts = yaml.safe_load((LAB_INVENTORY / "hosts.yml").read_text())
    hosts["all"]["children"] = {"vke_clusters": hosts["all"]["children"]["vke_clusters"]}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    all_vars = inventory / "group_vars" / "all.yml"
    settings = yaml.safe_load(all_vars.read_text())
    del settings["vultr_api_key"]
    settings["modelplane_kubeconfig"] = "{{ lookup('ansible.builtin.env', 'MODELPLANE_KUBECONFIG') }}"
    all_vars.write_text(yaml.safe_dump(settings, sort_keys=False))
    return inventory


def credentials(lab: VkeLab) -> list[Credential]:
    """The job's credentials, as an AWX user would paste them: the key, and the kubeconfig's text."""
    return [
        Credential("Metalplane Vultr API key", {"api_key": VULTR_KEY}),
        Credential("Metalplane Modelplane control plane", {"kubeconfig": lab.mp.kubeconfig_path.read_text()}),
    ]


def run_job(lab: VkeLab, tmp: Path, name: str, **kwargs: Any) -> Job:
    env = {
        "LAB_STATE_DIR": str(lab.state),
        "TMPDIR": str(lab.tmp),
        "ANSIBLE_COLLECTIONS_PATH": str(ensure_collection_tree()),
        "VULTR_API_KEY": "",  # only the credential may bring it
        "MODELPLANE_KUBECONFIG": "",
    }
    runs = tmp / "jobs"
    runs.mkdir(exist_ok=True)
    private = runs / f"{len(list(runs.iterdir())):02d}-{name.replace(' ', '-')}"
    return launch(
        job_template(name),
        inventory=awx_inventory(private),
        private_data_dir=private,
        credentials=credentials(lab),
        env=env,
        **kwargs,
    )


def results(job: Job) -> str:
    return f"{job.name}: rc={job.rc} status={job.status}\n{job.stdout[-4000:]}"


def test_reconcile_workflow_then_confirmed_down_on_the_lab(lab: VkeLab, tmp_path: Path) -> None:
    """The workflow's three jobs in order (preflight, site, verify), then ``metalplane down``: refused without the
    survey's confirmation, done with it. Each job runs with the credentials injected AWX's way and leaves no secret
    in its artifacts."""
    secrets = {"Vultr API key": VULTR_KEY, "Modelplane token": MODELPLANE_TOKEN}
    jobs: list[Job] = []

    preflight = run_job(lab, tmp_path, "metalplane preflight")
    jobs.append(preflight)
    assert preflight.rc == 0, results(preflight)
    checked = preflight.task_results(PREFLIGHT)
    assert [e["event"] for e in checked if e["event"] != "runner_on_start"] == ["runner_on_ok"], results(preflight)
    assert {r["method"] for r in lab.vultr.requests} <= {"GET"}, "the preflight wrote to Vultr"

    site = run_job(lab, tmp_path, "metalplane site")  # the survey left unanswered: the inventory's state
    jobs.append(site)
    assert site.rc == 0, results(site)
    assert lab.mp.api.get("modelplane.ai/v1alpha1", "InferenceCluster", CLUSTER)["metadata"]["name"] == CLUSTER
    # The kubeconfig AWX wrote for the job is the control plane's, owner-only, in the private data directory.
    assert site.job_env["VULTR_API_KEY"] == "**********"  # AWX masks it by its name
    (kubeconfig,) = site.injected_files
    assert kubeconfig.parent == site.private_data_dir / "env"
    assert kubeconfig.stat().st_mode & 0o777 == 0o600
    assert MODELPLANE_TOKEN in kubeconfig.read_text()

    verify = run_job(lab, tmp_path, "metalplane verify", limit=CLUSTER)
    jobs.append(verify)
    assert verify.rc == 0, results(verify)
    served = [r["cluster"] for r in lab.mp.requests]
    assert served.count(CLUSTER) >= 2, served  # site's smoke test (the cluster was created), then verify's

    refused = run_job(
        lab, tmp_path, "metalplane down", limit=CLUSTER, survey_answers={"metalplane_down_confirm": "yes"}
    )
    jobs.append(refused)
    assert refused.rc != 0
    assert "Not confirmed" in refused.stdout
    assert lab.mp.api.get("modelplane.ai/v1alpha1", "InferenceCluster", CLUSTER) is not None

    down = run_job(
        lab, tmp_path, "metalplane down", limit=CLUSTER, survey_answers={"metalplane_down_confirm": "DESTROY"}
    )
    jobs.append(down)
    assert down.rc == 0, results(down)
    assert lab.mp.api.get("modelplane.ai/v1alpha1", "InferenceCluster", CLUSTER) is None

    for job in jobs:
        assert any(e.get("event") == "playbook_on_stats" for e in job.events), f"{job.name}: no job events"
        assert job.leaks(secrets) == [], job.name


@pytest.mark.parametrize(
    ("template", "answers", "refusal"),
    [
        ("metalplane site", {"cluster_state": "gone"}, "not one of"),
        ("metalplane site", {"vke_cluster_region": "ams"}, "not asked by its survey"),
        ("metalplane down", {}, "is required"),
        ("metalplane down", {"metalplane_down_confirm": "DESTROY" * 3}, "outside the survey's bounds"),
    ],
)
def test_survey_answers_are_checked_before_a_job_starts(template: str, answers: dict[str, str], refusal: str) -> None:
    """As AWX checks them at launch: a state that is not a choice, a variable the survey does not ask for, a
    missing confirmation never reach a playbook."""
    with pytest.raises(ValueError, match=refusal):
        check_survey(job_template(template), answers)


def test_survey_answers_within_the_survey_are_accepted() -> None:
    check_survey(job_template("metalplane site"), {"cluster_state": "absent"})
    check_survey(job_template("metalplane site"), {})  # optional: each cluster keeps its inventory state
    check_survey(job_template("metalplane down"), {"metalplane_down_confirm": "DESTROY"})
