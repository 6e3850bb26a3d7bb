"""The longhorn_rwx role may only set values keys that the real Longhorn chart documents.

Why: Helm silently ignores an unknown values key, so a typo (``longhornManager.toleration``) or a key
that only the lab stand-in chart knows would leave the GPU nodes without Longhorn and nothing would
fail. The role's values template (rendered by Ansible's own templar with the role defaults) must not
use any key outside DOCUMENTED_KEYS, and the stand-in chart must declare the same keys.

Where the keys come from: the chart ``longhorn/longhorn`` at the version the role pins
(``longhorn_chart_version`` 1.12.2, DOCUMENTED_FOR), upstream file ``chart/values.yaml`` of the
longhorn/longhorn repository (tag v1.12.2; the chart is published at https://charts.longhorn.io).
That file cannot be fetched here: no package on PyPI or npm ships it (checked 2026-12: npm has no
``longhorn`` package, PyPI's ``longhorn`` is an unrelated blog engine, and neither registry lists a
Longhorn chart), so there is nothing to pin by checksum. The list is therefore typed by hand from
chart/values.yaml on master 1.12.0-dev (longhorn/longhorn commit bb2f2223 of 2026-08-21; values for a
tainted node) and the Longhorn 1.12.2 documentation (longhorn/website commit 0f622500: the
taint-toleration page, and deletingConfirmationFlag before uninstall). Every
key except ``global.tolerations`` and ``defaultSettings.deletingConfirmationFlag`` also appears in
the chart's values.yaml of v1.3.3-rc2 (a copy of that file was read for this check), so these are
long-standing keys. When the pinned chart version
changes, test_key_list_matches_the_pinned_chart_version fails until the list is checked against that
version's values.yaml and DOCUMENTED_FOR is moved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "longhorn_rwx"
STANDIN_VALUES = REPO / "tests" / "lab" / "charts" / "longhorn-standin" / "values.yaml"

# Documented values keys of the chart longhorn/longhorn (chart/values.yaml), as of DOCUMENTED_FOR.
# Source: see the module docstring. persistence.defaultClass is not named there; it is the
# first key of the `persistence` block of chart/values.yaml in every released chart (v1.3 onwards,
# "Setting that allows you to specify the default Longhorn StorageClass"), next to
# persistence.defaultClassReplicaCount.
DOCUMENTED_FOR = "1.12.2"
DOCUMENTED_KEYS = frozenset(
    {
        "global.tolerations",
        "longhornManager.tolerations",
        "longhornDriver.tolerations",
        "longhornUI.tolerations",
        "defaultSettings.taintToleration",
        "defaultSettings.defaultReplicaCount",
        "defaultSettings.replicaSoftAntiAffinity",
        "defaultSettings.deletingConfirmationFlag",
        "persistence.defaultClass",
        "persistence.defaultClassReplicaCount",
    }
)

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def leaf_keys(values: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of the values' leaves (a list, like tolerations, is one leaf)."""
    keys: set[str] = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            keys |= leaf_keys(value, f"{path}.")
        else:
            keys.add(path)
    return keys


def undocumented(values: dict[str, Any]) -> set[str]:
    return leaf_keys(values) - DOCUMENTED_KEYS


def role_defaults() -> dict[str, Any]:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def render_values(**overrides: Any) -> dict[str, Any]:
    variables = {**role_defaults(), "longhorn_kubeconfig": "/dev/null", "_longhorn_rwx_replicas": 3, **overrides}
    templar = Templar(loader=DataLoader(), variables=variables)
    text = trust_as_template((ROLE / "templates" / "values.yml.j2").read_text())
    return yaml.safe_load(templar.template(text))


def test_role_values_use_only_documented_keys() -> None:
    values = render_values()
    assert leaf_keys(values), "the values template rendered nothing"
    assert undocumented(values) == set()


def test_checker_catches_an_unknown_key() -> None:
    values = render_values()
    values["longhornManager"]["toleration"] = [GPU_TOLERATION]  # the typo Helm would ignore
    values["defaultSettings"]["taintTolerations"] = "x"
    assert undocumented(values) == {"longhornManager.toleration", "defaultSettings.taintTolerations"}


def test_standin_chart_declares_every_key_the_role_sets() -> None:
    standin = yaml.safe_load(STANDIN_VALUES.read_text())
    assert leaf_keys(render_values()) <= leaf_keys(standin)


def test_gpu_taint_is_tolerated_everywhere_by_default() -> None:
    values = render_values()
    for component in ("longhornManager", "longhornDriver", "longhornUI"):
        assert values[component]["tolerations"] == [GPU_TOLERATION], component
    assert values["defaultSettings"]["taintToleration"] == "nvidia.com/gpu=true:NoSchedule"
    assert values["defaultSettings"]["deletingConfirmationFlag"] is False
    assert values["persistence"]["defaultClass"] is False
    assert values["persistence"]["defaultClassReplicaCount"] == 3
    assert values["defaultSettings"]["defaultReplicaCount"] == 3


@pytest.mark.parametrize(
    ("tolerations", "explicit", "expected"),
    [
        ([GPU_TOLERATION], "", "nvidia.com/gpu=true:NoSchedule"),
        (
            [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
            ],
            "",
            "nvidia.com/gpu:NoSchedule;dedicated=ml:NoExecute",
        ),
        ([GPU_TOLERATION], "a=b:NoSchedule", "a=b:NoSchedule"),
    ],
)
def test_taint_toleration_setting(tolerations: list[dict[str, str]], explicit: str, expected: str) -> None:
    values = render_values(longhorn_tolerations=tolerations, longhorn_taint_toleration=explicit)
    assert values["defaultSettings"]["taintToleration"] == expected
    assert values["longhornManager"]["tolerations"] == tolerations


def test_argument_spec_documents_every_default() -> None:
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    defaults = role_defaults()
    assert set(defaults) <= set(spec), set(defaults) - set(spec)
    for name, option in spec.items():
        if "default" in option:
            assert defaults[name] == option["default"], name
    assert spec["longhorn_kubeconfig"]["required"] is True
    assert "longhorn_kubeconfig" not in defaults


def test_key_list_matches_the_pinned_chart_version() -> None:
    """A new pinned chart version needs the key list checked against its values.yaml first."""
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert str(role_defaults()["longhorn_chart_version"]) == DOCUMENTED_FOR
    assert str(spec["longhorn_chart_version"]["default"]) == DOCUMENTED_FOR
