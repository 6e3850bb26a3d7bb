"""The bare-metal lab for site.yml runs: BMCs with simulated servers, the Modelplane control plane, the artifacts.

Why a module of its own: the lifecycle test, the personality runs and the kill matrix all drive the shipped
``playbooks/site.yml`` against the same in-process lab (``endpoints.yml`` written as ``labctl up`` writes it, so
the shipped ``inventories/lab`` works unchanged) and read the same things back: the BMC, the simulated server,
the claim Leases and the ISO files.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lab.common.artifacts import ArtifactServer
from lab.labctl import CILIUM_STANDIN_CHART, LAB_HELM, LONGHORN_STANDIN_CHART
from lab.metal.fleet import MetalFleet
from lab.modelplane.server import DEFAULT_TOKEN, ModelplaneEmulator
from lab.redfish.personality import DEFAULT_BMCS, LAB_PASSWORD
from lab.redfish.server import BmcSpec, RedfishLab
from support.playbook import PlaybookRun, run_playbook
from support.vendor_isos import require_bootloaders

REPO = Path(__file__).resolve().parents[3]
SITE = REPO / "playbooks" / "site.yml"
INVENTORY = REPO / "inventories" / "lab"
KILL_PLUGINS = Path(__file__).resolve().parent / "kill_plugins"
NAMESPACE = "modelplane-system"
CLUSTER = "lab-r730"
# The lab's delays scaled so far down that a whole install takes about a second, as in `make demo`'s spirit.
DELAY_SCALE = 0.02
# Seconds one site.yml run may take on a busy two-core machine (the runs measured 1 to 3 minutes there).
RUN_TIMEOUT = 1200


@dataclass
class MetalLab:
    redfish: RedfishLab
    fleet: MetalFleet
    modelplane: ModelplaneEmulator
    artifacts: ArtifactServer
    state: Path
    tmp: Path

    def leases(self) -> list[dict[str, Any]]:
        """The host claims (a run's lock is a Lease in the same namespace, freed within seconds of the run's end)."""
        found = self.modelplane.api.list("coordination.k8s.io/v1", "Lease", namespace=NAMESPACE)
        return [lease for lease in found if not lease["metadata"]["name"].startswith("metalplane-run.")]

    def run_locks(self) -> list[str]:
        """The names of the run locks held now (``run_lock``'s Leases; each run's renewer deletes its own)."""
        found = self.modelplane.api.list("coordination.k8s.io/v1", "Lease", namespace=NAMESPACE)
        return [n for n in (lease["metadata"]["name"] for lease in found) if n.startswith("metalplane-run.")]

    def held_by(self, cluster: str) -> list[dict[str, Any]]:
        return [lease for lease in self.leases() if (lease.get("spec") or {}).get("holderIdentity") == cluster]

    def host(self, name: str) -> dict[str, Any]:
        return self.fleet.host(name).snapshot()

    def isos(self) -> list[Path]:
        """Every host ISO (and kept host key) left on the controller or in the published directory."""
        roots = [self.state / "metal-isos", self.state / "artifacts" / "hosts"]
        return sorted(p for root in roots if root.is_dir() for p in root.iterdir() if ".iso" in p.name)

    def site(
        self,
        *,
        check: bool = False,
        inventory: Path = INVENTORY,
        limit: str = "metal_clusters",
        kill_after: str | None = None,
        timeline: Path | None = None,
        tags: str | None = None,
        verbosity: int = 0,
        **extra_vars: Any,
    ) -> PlaybookRun:
        """site.yml on the lab; with ``timeline``, the timeline callback writes its reports there; ``tags`` limits the
        run to those phases (``phase:<name>,...``, as a user's ``--tags``); ``verbosity`` 3 is ``-vvv``."""
        env = {"LAB_STATE_DIR": str(self.state), "TMPDIR": str(self.tmp)}
        if timeline is not None:
            env.update(ANSIBLE_CALLBACKS_ENABLED="metalplane.inference.timeline", METALPLANE_TIMELINE_DIR=str(timeline))
        if kill_after:
            env.update(
                ANSIBLE_CALLBACK_PLUGINS=str(KILL_PLUGINS),
                ANSIBLE_CALLBACKS_ENABLED="kill_after",
                METALPLANE_KILL_AFTER=kill_after,
            )
        return run_playbook(
            SITE,
            inventory=inventory,
            extra_vars=extra_vars or None,
            env=env,
            check=check,
            diff=check,
            limit=limit,
            tags=tags,
            verbosity=verbosity,
            timeout=RUN_TIMEOUT,
        )


@contextmanager
def metal_lab(
    tmp: Path,
    bmcs: dict[str, str] | None = None,
    delay_scale: float = DELAY_SCALE,
    *,
    bmc_password: str = LAB_PASSWORD,
    bmc_passwords: dict[str, str] | None = None,
    modelplane_token: str = DEFAULT_TOKEN,
) -> Iterator[MetalLab]:
    """The lab on loopback with ``endpoints.yml`` in ``tmp/state`` (``bmcs``: name -> personality); the secret scan
    gives the BMCs and the control plane credentials it can recognise. ``bmc_passwords`` gives BMCs passwords of
    their own (name -> password): endpoints.yml then has no shared one, and the inventory must carry them."""
    require_bootloaders()
    state = tmp / "state"
    state.mkdir()
    own = bmc_passwords or {}
    specs = [
        BmcSpec(name=n, personality=p, password=own.get(n, bmc_password)) for n, p in (bmcs or DEFAULT_BMCS).items()
    ]
    with (
        ModelplaneEmulator(delay_scale=0.0, token=modelplane_token) as modelplane,
        ArtifactServer(state / "artifacts") as artifacts,
        RedfishLab(bmcs=specs, delay_scale=delay_scale, state_dir=state) as redfish,
        MetalFleet(redfish.states, state, delay_scale=delay_scale) as fleet,
    ):
        described = fleet.describe()
        endpoints = {
            "lab": {
                "state_dir": str(state),
                "delay_scale": delay_scale,
                "longhorn_chart_path": str(LONGHORN_STANDIN_CHART),
                "cilium_chart_path": str(CILIUM_STANDIN_CHART),
                "helm": str(LAB_HELM) if LAB_HELM.is_file() else "",
            },
            "emulators": {
                "artifacts": {
                    "base_url": artifacts.base_url,
                    "installer_isos": {
                        shape: {
                            "url": f"{artifacts.base_url}/{name}",
                            "sha256": _sha256(state / "artifacts" / name),
                        }
                        for shape, name in artifacts.vendor_isos.items()
                    },
                    "nvidia_driver": {
                        "url": f"{artifacts.base_url}/{artifacts.nvidia_driver['path']}",
                        "sha256": artifacts.nvidia_driver["sha256"],
                        "version": artifacts.nvidia_driver["version"],
                    },
                },
                "modelplane": {"kubeconfig": str(modelplane.kubeconfig_path)},
                "redfish": {**redfish.describe(), "hosts": described["hosts"], "ssh_key": described["ssh_key"]},
            },
        }
        (state / "endpoints.yml").write_text(yaml.safe_dump(endpoints))
        yield MetalLab(redfish, fleet, modelplane, artifacts, state, tmp)


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def single_host_inventory(tmp: Path, bmc: str) -> Path:
    """``inventories/lab`` with a pool of one BMC and a cluster on it (the node address and port are that host's)."""
    inventory = tmp / f"inventory-{bmc}"
    inventory.mkdir()
    shutil.copytree(INVENTORY / "group_vars", inventory / "group_vars")
    host = f"lab.emulators.redfish.hosts['{bmc}']"
    cluster = {
        "cluster_networks": ["10.244.0.0/16", "10.96.0.0/12"],
        "baremetal_host_pool": "lab",
        "baremetal_host_requirements": {"gpu_model": "V100", "gpu_count": 2},
        "baremetal_host_node_ip": f"{{{{ {host}.ssh_address }}}}/{{{{ {host}.prefix }}}}",
        "baremetal_host_gateway": f"{{{{ {host}.gateway }}}}",
        "baremetal_host_dns": [f"{{{{ {host}.gateway }}}}"],
        "baremetal_host_ssh_port": f"{{{{ {host}.ssh_port }}}}",
        "kubeadm_node_api_port": f"{{{{ {host}.api_port }}}}",
    }
    hosts = {"all": {"children": {"metal_clusters": {"hosts": {CLUSTER: cluster}}, "pool_lab": {"hosts": {bmc: None}}}}}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    return inventory
