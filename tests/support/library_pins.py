"""The library versions ``requirements.txt`` pins, for the adapter tests' failure messages.

Why: ``_redfish/sushy_adapter.py`` and ``_vultr/vultr_adapter.py`` reach into library internals that
any release may move. Their tests check each internal against the installed library; when one
fails, the message must say which attribute, which installed version, and which range the adapter
was checked against, so whoever bumps the library knows what to fix before widening the pin.
"""

from __future__ import annotations

from importlib.metadata import version

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from .collection import REPO_ROOT

REQUIREMENTS = REPO_ROOT / "requirements.txt"


def pinned(distribution: str) -> SpecifierSet:
    """The version range ``requirements.txt`` gives ``distribution`` (empty when not listed)."""
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            requirement = Requirement(text)
            if requirement.name == distribution:
                return requirement.specifier
    return SpecifierSet()


def moved(distribution: str, adapter: str, what: str) -> str:
    """The failure message of an adapter test: what moved, in which version, checked against what."""
    return (
        f"{distribution} {version(distribution)} changed {what}; {adapter} was checked against "
        f"{distribution}{pinned(distribution)} (requirements.txt). Adapt {adapter} to this release "
        "(or pin the library below it), then widen the pin."
    )
