"""Every module's argument spec against its documentation, and the house shape of every spec.

Why: DOCUMENTATION (what ansible-doc, the reference page and the roles' authors read) and the
argument spec (what AnsibleModule enforces) are written by hand side by side; nothing else stops
them drifting. The documentation is read exactly as ansible-doc reads it (``get_docstring`` with
the doc fragments merged), so a fragment that no longer matches its platform's spec fails here too.
The same walk checks what must hold for every option of every module: secrets are ``no_log``, a
recurring idea has one name, type and unit, and ``main()`` uses the module's ``argument_spec()``.
"""

from __future__ import annotations

import copy
import importlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible.plugins.loader import fragment_loader
from ansible.utils.plugin_docs import add_fragments, get_docstring

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import (
    wait_argument_spec,
    wait_timeout_spec,
)
from ansible_collections.metalplane.inference.plugins.module_utils._kube.args import kube_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.args import modelplane_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._nvidia.args import nvidia_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import redfish_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.args import vultr_argument_spec

COLLECTION = "metalplane.inference"
MODULES_DIR = Path(__file__).resolve().parents[4] / "plugins" / "modules"
MODULE_NAMES = sorted(p.stem for p in MODULES_DIR.glob("*.py") if p.stem != "__init__")

# Each platform's common options and the doc fragment that documents them (fragment name as used in
# ``extends_documentation_fragment``).
PLATFORM_SPECS: list[tuple[Callable[[], dict[str, Any]], str]] = [
    (vultr_argument_spec, "vultr"),
    (redfish_argument_spec, "redfish"),
    (kube_argument_spec, "kube"),
    (modelplane_argument_spec, "modelplane"),
    (nvidia_argument_spec, "nvidia"),
]

# Option names that carry a credential: always no_log=True (Ansible only guesses for "pass*").
SECRET = re.compile(r"(^|_)(password|passphrase|api_key|token|secret)$")
# Names that look secret-ish ("key" of a taint, "secret_name", "client_key" path): no_log must be set
# explicitly, True or False, so a new option of this kind is a decision, not an accident.
SECRET_LOOKING = re.compile(r"key|token|secret|pass")

# One name for one idea (see docs/architecture.md, "Principles"): the shape every recurring option has.
RECURRING: dict[str, dict[str, Any]] = {
    "wait": {"type": "bool", "default": True},
    "wait_timeout": {"type": "int"},  # a wait's deadline, seconds
    "api_timeout": {"type": "int"},  # one HTTP request, seconds
    "validate_certs": {"type": "bool"},
    "ca_cert": {"type": "path"},
}
# Names replaced by the ones above; they must not come back (the collection carries no aliases for them).
RETIRED = {
    "timeout": "wait_timeout (a wait) or api_timeout (one HTTP request)",
    "ca_path": "ca_cert",
}
# Any other option whose name says it is a duration is a whole number of seconds (switches such as
# ``force_off_after_timeout`` aside).
DURATION = re.compile(r"(_timeout|_delay)$")


def module(name: str) -> ModuleType:
    return importlib.import_module(f"ansible_collections.{COLLECTION}.plugins.modules.{name}")


def documented_options(name: str) -> dict[str, Any]:
    """The options as ansible-doc shows them: the module's own merged with its doc fragments."""
    doc, _examples, _returns, _metadata = get_docstring(
        module(name).__file__, fragment_loader, collection_name=COLLECTION, is_module=True
    )
    return doc["options"]


def fragment_options(fragment: str) -> dict[str, Any]:
    """One doc fragment's options, read through a throwaway module that extends only that fragment."""
    doc: dict[str, Any] = {"options": {}, "extends_documentation_fragment": [f"{COLLECTION}.{fragment}"]}
    add_fragments(doc, __file__, fragment_loader=fragment_loader, is_module=True)
    return doc["options"]


def compare(spec: dict[str, Any], docs: dict[str, Any], where: str) -> None:
    """Same option names, and for each: type, default, choices, required, elements, aliases, suboptions."""
    assert sorted(spec) == sorted(docs), f"{where}: spec and documentation name different options"
    for name, option in spec.items():
        doc = docs[name]
        at = f"{where}.{name}"
        assert doc.get("type", "str") == option.get("type", "str"), f"{at}: type"
        assert doc.get("default") == option.get("default"), f"{at}: default"
        assert doc.get("choices") == option.get("choices"), f"{at}: choices"
        assert bool(doc.get("required")) == bool(option.get("required")), f"{at}: required"
        assert doc.get("elements") == option.get("elements"), f"{at}: elements"
        assert sorted(doc.get("aliases", [])) == sorted(option.get("aliases", [])), f"{at}: aliases"
        if "options" in option or "suboptions" in doc:
            compare(option.get("options") or {}, doc.get("suboptions") or {}, at)


def walk(spec: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(dotted path, name, option) for every option and suboption."""
    for name, option in spec.items():
        yield f"{prefix}{name}", name, option
        yield from walk(option.get("options") or {}, f"{prefix}{name}.")


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_documentation_matches_argument_spec(name: str) -> None:
    compare(module(name).argument_spec(), documented_options(name), name)


@pytest.mark.parametrize(("spec_function", "fragment"), PLATFORM_SPECS)
def test_platform_spec_matches_its_doc_fragment(spec_function: Callable[[], dict[str, Any]], fragment: str) -> None:
    compare(spec_function(), fragment_options(fragment), fragment)


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_secrets_are_no_log(name: str) -> None:
    for path, option_name, option in walk(module(name).argument_spec()):
        if SECRET.search(option_name):
            assert option.get("no_log") is True, f"{name}.{path} is a credential: set no_log=True"
        elif SECRET_LOOKING.search(option_name):
            assert "no_log" in option, f"{name}.{path} looks secret: set no_log explicitly (True or False)"


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_recurring_options_have_one_name_type_and_unit(name: str) -> None:
    for path, option_name, option in walk(module(name).argument_spec()):
        assert option_name not in RETIRED, f"{name}.{path}: renamed to {RETIRED[option_name]}"
        for alias in option.get("aliases", []):
            assert alias not in RETIRED, f"{name}.{path}: alias {alias} was renamed to {RETIRED[alias]}"
        for key, value in RECURRING.get(option_name, {}).items():
            assert option.get(key) == value, f"{name}.{path}: {key} must be {value!r}"
        if DURATION.search(option_name) and option.get("type") != "bool":
            assert option.get("type") == "int", f"{name}.{path}: durations are int seconds"


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_main_runs_with_the_module_argument_spec(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``main()`` builds its AnsibleModule from ``argument_spec()``, not from a spec of its own."""
    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def fake_module(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise Stop

    target = module(name)
    monkeypatch.setattr(target, "MetalplaneModule", fake_module)
    with pytest.raises(Stop):
        target.main()
    assert seen["argument_spec"] == target.argument_spec()


SPEC_FUNCTIONS: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    *((fragment, function) for function, fragment in PLATFORM_SPECS),
    ("wait_argument_spec", lambda: wait_argument_spec(60)),
    ("wait_timeout_spec", lambda: wait_timeout_spec(60)),
    *((name, module(name).argument_spec) for name in MODULE_NAMES),
]


@pytest.mark.parametrize(("label", "function"), SPEC_FUNCTIONS, ids=[label for label, _unused in SPEC_FUNCTIONS])
def test_every_call_returns_a_fresh_spec(label: str, function: Callable[[], dict[str, Any]]) -> None:
    """A caller may change what it got (add a default, drop an option) without changing the next caller's."""
    first = function()
    pristine = copy.deepcopy(first)
    for _path, _name, option in walk(first):
        option["default"] = "changed by a caller"
    assert function() == pristine, label
