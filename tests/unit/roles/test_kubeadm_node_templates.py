"""The kubeadm_node role's kubeadm configuration is what kubeadm v1beta4 accepts; its Cilium values render the chart.

Why: kubeadm decodes its configuration strictly, so a misspelt or v1beta3-only field in the template fails
``kubeadm init`` on a real node only. The template is rendered here by Ansible's own templar with the role's
defaults and vars and checked by the lab's validator (``lab.metal.kubeadm_config``, kubeadm's v1beta4 field names),
which the lab's kubeadm shim applies too.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from lab.metal.kubeadm_config import ConfigError, validate

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "kubeadm_node"
CILIUM_STANDIN = REPO / "tests" / "lab" / "charts" / "cilium-standin"
HELM = REPO / ".build" / "bin" / "helm"


def role_variables(**overrides: Any) -> dict[str, Any]:
    variables: dict[str, Any] = {
        "inventory_hostname": "r730",
        "ansible_host": "192.168.120.70",
        "ansible_managed": "managed by Ansible",
        "kubeadm_node_kubeconfig_dir": "/tmp/kube",
        "_kubeadm_node_name": "r730-node",
    }
    for layer in ("defaults", "vars"):
        # As Ansible loads a role's files: their strings are templates (trusted), rendered when used.
        loaded = yaml.safe_load((ROLE / layer / "main.yml").read_text())
        variables.update({k: trust_as_template(v) if isinstance(v, str) else v for k, v in loaded.items()})
    variables.update({"kubeadm_node_kubernetes_version": "v1.34.2", **overrides})
    return variables


def render(template: str, **overrides: Any) -> str:
    templar = Templar(loader=DataLoader(), variables=role_variables(**overrides))
    return str(templar.template(trust_as_template((ROLE / "templates" / template).read_text())))


# (case, variables, what the settings carry)
CONFIGS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "defaults",
        {},
        {"kubernetes_version": "v1.34.2", "bind_port": 6443, "pod_subnet": "10.244.0.0/16", "kube_proxy": False},
    ),
    (
        "lab port, mirror registry, version without v",
        {
            "kubeadm_node_kubernetes_version": "1.34.2",
            "kubeadm_node_api_port": 36443,
            "kubeadm_node_image_repository": "registry.example:5000/k8s",
        },
        {"kubernetes_version": "v1.34.2", "bind_port": 36443, "image_repository": "registry.example:5000/k8s"},
    ),
    (
        "other CIDRs",
        {"kubeadm_node_pod_cidr": "10.42.0.0/16", "kubeadm_node_service_cidr": "10.43.0.0/16"},
        {"pod_subnet": "10.42.0.0/16", "service_subnet": "10.43.0.0/16", "node_name": "r730-node"},
    ),
]


@pytest.mark.parametrize(("case", "variables", "expected"), CONFIGS, ids=[c[0] for c in CONFIGS])
def test_kubeadm_config_is_valid_v1beta4(case: str, variables: dict[str, Any], expected: dict[str, Any]) -> None:
    settings = validate(render("kubeadm-config.yaml.j2", **variables), "v1.34.2")
    assert {key: getattr(settings, key) for key in expected} == expected, case
    assert settings.advertise_address == "192.168.120.70"
    assert settings.skip_phases == ["addon/kube-proxy"]


def test_too_old_a_version_is_refused_by_the_validator() -> None:
    with pytest.raises(ConfigError, match=r">= v1\.31\.0"):
        validate(render("kubeadm-config.yaml.j2", kubeadm_node_kubernetes_version="v1.30.4"))


def test_cilium_values_replace_kube_proxy_and_point_at_the_node() -> None:
    values = yaml.safe_load(render("cilium-values.yml.j2", kubeadm_node_api_port=36443))
    assert values["kubeProxyReplacement"] is True
    assert (values["k8sServiceHost"], values["k8sServicePort"]) == ("192.168.120.70", 36443)
    assert values["ipam"] == {"mode": "kubernetes"}
    assert values["l2announcements"] == {"enabled": True}
    assert values["k8sClientRateLimit"]["qps"] > 10  # raised for L2 announcement leases


@pytest.mark.skipif(not HELM.is_file() and shutil.which("helm") is None, reason="helm is not installed (make venv)")
def test_cilium_values_render_the_standin_chart(tmp_path: Path) -> None:
    values = tmp_path / "values.yml"
    values.write_text(render("cilium-values.yml.j2"))
    helm = str(HELM) if HELM.is_file() else str(shutil.which("helm"))
    output = subprocess.run(
        [helm, "template", "cilium", str(CILIUM_STANDIN), "-n", "kube-system", "-f", str(values)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    config = next(d for d in yaml.safe_load_all(output) if d and d["kind"] == "ConfigMap")
    assert config["data"]["kube-proxy-replacement"] == "true"
    assert config["data"]["enable-l2-announcements"] == "true"
    assert config["data"]["k8s-service-host"] == "192.168.120.70"
