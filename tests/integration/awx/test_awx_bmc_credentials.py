"""BMC passwords in AWX: per-BMC passwords in a vault-encrypted inventory, or one shared account as a credential.

Why: a job template takes one credential of each type, so one "Metalplane Redfish BMC" credential cannot carry a
pool's per-BMC passwords (docs/awx.md). Both supported ways are launched here as AWX launches them (support.awx):
the `metalplane preflight` job template, whose bare-metal preflight logs in to the pool's BMCs, against lab BMCs
that each have a password of their own.

- Vault: each BMC's ``bmc_password`` is an inline-vaulted string in the inventory's host_vars; AWX's Vault
  credential types the vault password at ``--ask-vault-pass``'s prompt. A BMC given another BMC's password is
  passed over as unreachable: the password used is the host's own.
- Shared account: the pool's group_vars read REDFISH_USERNAME / REDFISH_PASSWORD, which the credential injects.

Neither the vault password nor a BMC password appears in what AWX keeps of the jobs (stdout, job events).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from integration.metal.metal_site import CLUSTER, INVENTORY, MetalLab, metal_lab

from support.awx import Credential, Job, job_template, launch
from support.collection import ensure_collection_tree

# Each lab BMC's own password; r730-1 is the host the lab cluster's requirements (2x V100) pick.
BMC_PASSWORDS = {
    "r730-1": "awx-bmc-r730-3c1f9a0e",
    "r740-1": "awx-bmc-r740-77d2b6c4",
    "gen-1": "awx-bmc-gen-0b9e5d11",
}
VAULT_PASSWORD = "awx-vault-password-4e6a1f2b"
PREFLIGHT = "Check every bare-metal cluster and its pool (rules, claims, BMC inventories, installer ISOs; no write)"


@pytest.fixture
def lab(ansible_tmp: Path) -> Iterator[MetalLab]:
    with metal_lab(ansible_tmp, bmc_passwords=BMC_PASSWORDS) as metal:
        yield metal


def metal_inventory(root: Path, host_vars: dict[str, dict[str, str]], pool_vars: dict[str, str] | None = None) -> Path:
    """inventories/lab with its bare-metal cluster only, the given host_vars per BMC and, optionally, pool_lab
    group_vars replaced."""
    inventory = root / "inventory"
    shutil.copytree(INVENTORY / "group_vars", inventory / "group_vars")
    hosts = yaml.safe_load((INVENTORY / "hosts.yml").read_text())
    children = hosts["all"]["children"]
    hosts["all"]["children"] = {name: group for name, group in children.items() if name != "vke_clusters"}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    (inventory / "host_vars").mkdir()
    for host, settings in host_vars.items():
        (inventory / "host_vars" / f"{host}.yml").write_text(settings_text(settings))
    if pool_vars is not None:
        pool = inventory / "group_vars" / "pool_lab.yml"
        settings = yaml.safe_load(pool.read_text())
        pool.write_text(yaml.safe_dump({**settings, **pool_vars}, sort_keys=False))
    return inventory


def settings_text(settings: dict[str, str]) -> str:
    return "---\n" + "".join(f"{key}: {value}\n" for key, value in settings.items())


def vaulted(secret: str, password_file: Path) -> str:
    """``ansible-vault encrypt_string`` output, as a user pastes it into host_vars."""
    ansible_vault = Path(sys.executable).with_name("ansible-vault")
    out = subprocess.run(
        [str(ansible_vault), "encrypt_string", "--vault-password-file", str(password_file), secret],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip().replace("\n", "\n  ")


def run_preflight(
    lab: MetalLab,
    private: Path,
    inventory: Path,
    *,
    vault_password: str | None = None,
    bmc_account: Credential | None = None,
) -> Job:
    """`metalplane preflight` with the control plane's kubeconfig and the node SSH key as credentials (the lab's
    operator key pair: the inventory's own settings of it are overridden by the credential's extra vars), and
    the given vault password or shared BMC account."""
    env = {
        "LAB_STATE_DIR": str(lab.state),
        "TMPDIR": str(lab.tmp),
        "ANSIBLE_COLLECTIONS_PATH": str(ensure_collection_tree()),
        "REDFISH_USERNAME": "",
        "REDFISH_PASSWORD": "",
    }
    node_key = yaml.safe_load((lab.state / "endpoints.yml").read_text())["emulators"]["redfish"]["ssh_key"]
    ssh_key = {"public_key": node_key["public_key"], "private_key": Path(node_key["private_key_file"]).read_text()}
    credentials = [
        Credential("Metalplane Modelplane control plane", {"kubeconfig": lab.modelplane.kubeconfig_path.read_text()}),
        Credential("Metalplane node SSH key", ssh_key),
        *([bmc_account] if bmc_account else []),
    ]
    return launch(
        job_template("metalplane preflight"),
        inventory=inventory,
        private_data_dir=private,
        credentials=credentials,
        env=env,
        vault_password=vault_password,
    )


def planned(job: Job) -> tuple[str, list[tuple[str, str]]]:
    """The host the preflight planned for the lab cluster, and the hosts it passed over."""
    (result,) = [e for e in job.task_results(PREFLIGHT) if e["event"] == "runner_on_ok"]
    (cluster,) = [c for c in result["event_data"]["res"]["clusters"] if c["name"] == CLUSTER]
    return cluster["host"]["name"], [(s["name"], s["status"]) for s in cluster.get("skipped_hosts", [])]


def test_per_bmc_passwords_from_a_vaulted_inventory(lab: MetalLab, tmp_path: Path) -> None:
    password_file = tmp_path / "vault-password"
    password_file.write_text(VAULT_PASSWORD + "\n")
    secrets = {"vault password": VAULT_PASSWORD, **BMC_PASSWORDS}
    own = {bmc: {"bmc_password": vaulted(password, password_file)} for bmc, password in BMC_PASSWORDS.items()}
    inventory = metal_inventory(tmp_path / "vault", own)
    assert "$ANSIBLE_VAULT;" in (inventory / "host_vars" / "r730-1.yml").read_text()

    job = run_preflight(lab, tmp_path / "vault", inventory, vault_password=VAULT_PASSWORD)
    assert job.rc == 0, job.stdout[-3000:]
    assert planned(job) == ("r730-1", [])
    # The node SSH key credential's private key, a 0600 file of the job: the preflight checked that file.
    key_file = next(path for path in job.injected_files if "PRIVATE KEY" in path.read_text())
    assert key_file.stat().st_mode & 0o777 == 0o600
    secrets["node SSH private key"] = key_file.read_text().splitlines()[1]  # a line of the key's body
    assert job.leaks(secrets) == []

    # r730-1 given r740-1's password: the BMC refuses it and the preflight passes it over for r740-1 (the next host
    # that meets the requirements), which its own password opens: each host's own password is the one sent.
    swapped = {**own, "r730-1": {"bmc_password": vaulted(BMC_PASSWORDS["r740-1"], password_file)}}
    inventory = metal_inventory(tmp_path / "swapped", swapped)
    job = run_preflight(lab, tmp_path / "swapped", inventory, vault_password=VAULT_PASSWORD)
    assert job.rc == 0, job.stdout[-3000:]
    assert planned(job) == ("r740-1", [("r730-1", "unreachable")])
    assert job.leaks(secrets) == []

    # A wrong vault password opens nothing: the job fails before any BMC is asked.
    wrong = run_preflight(lab, tmp_path / "wrong", metal_inventory(tmp_path / "wrong", own), vault_password="nope")
    assert wrong.rc != 0
    assert "Decryption failed" in wrong.stdout, wrong.stdout[-2000:]


def test_one_shared_bmc_account_from_the_redfish_credential(lab: MetalLab, tmp_path: Path) -> None:
    """The pool's group_vars read the credential's variables; r730-1 is planned with them."""
    shared = {
        "bmc_username": "{{ lookup('ansible.builtin.env', 'REDFISH_USERNAME') }}",
        "bmc_password": "{{ lookup('ansible.builtin.env', 'REDFISH_PASSWORD') }}",
    }
    inventory = metal_inventory(tmp_path / "shared", {}, pool_vars=shared)
    account = Credential("Metalplane Redfish BMC", {"username": "root", "password": BMC_PASSWORDS["r730-1"]})
    job = run_preflight(lab, tmp_path / "shared", inventory, bmc_account=account)
    assert job.rc == 0, job.stdout[-3000:]
    assert planned(job)[0] == "r730-1"
    assert job.job_env["REDFISH_PASSWORD"] == "**********"  # AWX masks it by its name
    assert job.leaks(BMC_PASSWORDS) == []
