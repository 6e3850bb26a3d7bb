"""The Metal3 names the collection's code relies on are Metal3's own (plugins/module_utils/_metal3 against lab.metal3).

Why: ``bmh.py`` and ``progress.py`` decide a wait's outcome and its recovery hint by comparing
``status.provisioning.state``, ``operationalStatus`` and ``errorType`` with string constants. A misspelt one
never matches, so a failure is never seen as one (or a recovery never offered), and nothing else would notice.
``lab.metal3.contract`` holds the values taken from Metal3's source (checked against the shipped excerpt of
``baremetalhost_types.go`` by test_metal3_contract.py); every constant the module uses must be among them, and
where the module lists all values of a kind the lists must agree.
"""

from __future__ import annotations

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import bmh as b
from ansible_collections.metalplane.inference.plugins.module_utils._metal3 import progress as p
from lab.metal3 import contract as c

# bmh.py's prefix of each kind of constant -> the values Metal3 declares for that kind.
KINDS = {
    "STATE_": c.PROVISIONING_STATES,
    "OPERATIONAL_": c.OPERATIONAL_STATUSES,
}


def constants(module: object, prefix: str) -> dict[str, str]:
    """The module's string constants named ``<prefix>...`` (name -> value)."""
    return {k: v for k, v in vars(module).items() if k.startswith(prefix) and isinstance(v, str)}


# (where, name, value, Metal3's values of that kind): every state and operational status bmh.py names, and every
# state and error type progress.py decides on.
CASES = [
    *((f"bmh.{name}", value, KINDS[prefix]) for prefix in KINDS for name, value in constants(b, prefix).items()),
    *((f"bmh.FREE_STATES[{i}]", value, c.PROVISIONING_STATES) for i, value in enumerate(b.FREE_STATES)),
    *(
        (f"progress.DEFAULT_STATE_TIMEOUTS[{value!r}]", value, c.PROVISIONING_STATES)
        for value in p.DEFAULT_STATE_TIMEOUTS
    ),
    *((f"progress.RAMDISK_STATES[{i}]", value, c.PROVISIONING_STATES) for i, value in enumerate(p.RAMDISK_STATES)),
    *(
        (f"progress.DEAD_ENDS[{goal!r}][{i}]", value, c.PROVISIONING_STATES)
        for goal, states in p.DEAD_ENDS.items()
        for i, value in enumerate(states)
    ),
    *((f"progress.BOOT_ERROR_TYPES[{i}]", value, c.ERROR_TYPES) for i, value in enumerate(p.BOOT_ERROR_TYPES)),
]


@pytest.mark.parametrize(("where", "value", "metal3s"), CASES, ids=[case[0] for case in CASES])
def test_every_name_the_module_uses_is_metal3s(where: str, value: str, metal3s: tuple[str, ...]) -> None:
    assert value in metal3s, f"{where} = {value!r} is not one of Metal3's {metal3s}"


def test_the_module_names_every_provisioning_state_as_metal3_does() -> None:
    """bmh.PROVISIONING_STATES lists them all: the same values, in Metal3's order."""
    assert list(b.PROVISIONING_STATES) == list(c.PROVISIONING_STATES)


def test_the_module_names_every_operational_status() -> None:
    assert sorted(constants(b, "OPERATIONAL_").values()) == sorted(c.OPERATIONAL_STATUSES)


def test_the_cases_cover_the_module() -> None:
    """A kind of constant added to bmh.py without being compared here fails: the table is built from the module."""
    assert len(constants(b, "STATE_")) == len(c.PROVISIONING_STATES)
    assert {case[0].split(".")[0] for case in CASES} == {"bmh", "progress"}


# (a misspelt name, the kind it claims to be): the check above refuses each, so it can fail.
MISSPELT = [
    ("provisionned", c.PROVISIONING_STATES),
    ("Error", c.OPERATIONAL_STATUSES),
    ("inspect error", c.ERROR_TYPES),
]


@pytest.mark.parametrize(("value", "metal3s"), MISSPELT)
def test_a_misspelt_name_fails_the_check(value: str, metal3s: tuple[str, ...]) -> None:
    with pytest.raises(AssertionError, match="is not one of Metal3's"):
        test_every_name_the_module_uses_is_metal3s("misspelt", value, metal3s)
