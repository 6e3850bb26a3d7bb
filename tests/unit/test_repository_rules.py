"""Repository rules that no linter checks: what the shipped collection's text may cite.

Why: comments, docstrings, ``DOCUMENTATION`` strings and argument-spec descriptions are read by users
who have only the collection. A citation of a document outside the repository (``shared/reference/...``,
"reference §3", "the issue") sends them nowhere; the fact belongs in place, with its upstream source
(a URL, a vendor document, a file in an upstream repository). This test fails naming ``file:line``
for every such citation under the shipped directories.

The lab (``tests/lab``) is not scanned: it reads the reference tree at run time as data
(``tests/lab/common/reference.py``), which is not a citation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# The directories the collection ships (plugins, roles, playbooks) plus the example inventories:
# everything a user reads without the project's private notes.
SHIPPED_DIRS = ("plugins", "roles", "playbooks", "inventories")

# Citations of documents a user does not have. Case-insensitive; "reference §" also covers
# "Reference §1.4" and "reference § 3".
FORBIDDEN_CITATIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("shared/reference", re.compile(r"shared/reference", re.IGNORECASE)),
    ("../shared", re.compile(r"\.\./shared\b", re.IGNORECASE)),
    ("reference §", re.compile(r"\breference\s*§", re.IGNORECASE)),
    ("the issue", re.compile(r"\bthe\s+issue\b", re.IGNORECASE)),
    ("reference: <file>.md", re.compile(r"\breference:\s*[\w./-]+\.md\b", re.IGNORECASE)),
    # A section sign must follow the document it points into (DSP0266 §13, RFC 9110 §15, a .md file).
    ("§ of no named document", re.compile(r"(?<!DSP\d{4} )(?<!RFC \d{4} )(?<!RFC\d{4} )(?<!\.md )§")),
)

# Generated or binary content that is not prose a user reads.
# .state: the lab's run-time state (logs, kubeconfigs) that `make demo`/`labctl up` write into inventories/lab.
SKIPPED_DIR_NAMES = frozenset({"__pycache__", ".pytest_cache", ".state"})


def shipped_files(root: Path, dirs: Iterable[str] = SHIPPED_DIRS) -> list[Path]:
    """Every regular file under ``dirs`` of ``root``, sorted, skipping caches."""
    files: list[Path] = []
    for name in dirs:
        base = root / name
        if not base.is_dir():
            continue
        files.extend(
            path
            for path in base.rglob("*")
            if path.is_file() and not SKIPPED_DIR_NAMES.intersection(path.relative_to(root).parts)
        )
    return sorted(files)


def citation_violations(root: Path, dirs: Iterable[str] = SHIPPED_DIRS) -> list[str]:
    """``file:line: cites '<pattern>': <text>`` for each forbidden citation under ``dirs`` of ``root``."""
    found: list[str] = []
    for path in shipped_files(root, dirs):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary file: no prose to read
        for number, line in enumerate(text.splitlines(), start=1):
            for label, pattern in FORBIDDEN_CITATIONS:
                if pattern.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: cites {label!r}: {line.strip()}")
    return found


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("# Facts: shared/reference/redfish-idrac.md section 3.", ["shared/reference"]),
        ("    See ../shared for the spec.", ["../shared"]),
        ('"""Retry on SYS446 (reference §3 rows 6-9)."""', ["reference §", "§ of no named document"]),
        ("    description: as Reference §1.4 says.", ["reference §", "§ of no named document"]),
        ("# Handles the issue's traps.", ["the issue"]),
        ("Three signals exist (reference: baremetal-gpu-k8s.md section 4):", ["reference: <file>.md"]),
        ("# See The Issue.", ["the issue"]),
        ("# Sources: openstack/ironic redfish/boot.py; https://www.vultr.com/api/", []),
        ("# ironic's known issue: about 90 s before ForceOff", []),
        ("# Each Vultr issue tracker entry is cited by URL.", []),
        ("# DSP0266 §13.2: the ETag and If-Match.", []),
        ("# RFC 9110 §15.5.13 and docs/architecture.md §2.", []),
        ("  applies (§1.4).", ["§ of no named document"]),
        ("# this is reissued, not re-referenced", []),
        ("# The phase contract: docs/timeline.md.", []),
    ],
)
def test_citation_patterns(tmp_path: Path, line: str, expected: list[str]) -> None:
    """Each forbidden pattern is caught on a line of its own kind; upstream citations are not."""
    target = tmp_path / "plugins" / "module_utils" / "example.py"
    target.parent.mkdir(parents=True)
    target.write_text(f"from __future__ import annotations\n{line}\n", encoding="utf-8")

    found = citation_violations(tmp_path)

    assert found == [f"plugins/module_utils/example.py:2: cites {label!r}: {line.strip()}" for label in expected]


@pytest.mark.parametrize("directory", SHIPPED_DIRS)
def test_every_shipped_directory_is_scanned(tmp_path: Path, directory: str) -> None:
    """A citation in any shipped directory, in any file type, is reported with its file and line."""
    target = tmp_path / directory / "sub" / "main.yml"
    target.parent.mkdir(parents=True)
    target.write_text("---\n# ok\n# see shared/reference/vultr-vke.md\n", encoding="utf-8")

    assert citation_violations(tmp_path) == [
        f"{directory}/sub/main.yml:3: cites 'shared/reference': # see shared/reference/vultr-vke.md"
    ]


def test_shipped_files_cite_no_outside_documents() -> None:
    """No file under plugins/, roles/, playbooks/ or inventories/ cites a document users do not have."""
    assert shipped_files(REPO_ROOT), "no shipped files found: REPO_ROOT is wrong"
    violations = citation_violations(REPO_ROOT)
    assert not violations, "state the fact and cite its upstream source instead:\n" + "\n".join(violations)


# Packages run with ``PYTHONPATH=tests python -m <package>.<module>`` (Makefile's LABCTL and bench): they
# import ``lab.*`` and ``support.*`` as packages, so none of their files edits ``sys.path``.
PATH_HACK_FREE_DIRS = ("tests/lab", "tests/bench")
SYS_PATH_EDIT = re.compile(r"\bsys\.path\s*(\[|\.insert|\.append|\.extend|=|\+=)")


def sys_path_edits(root: Path) -> list[str]:
    """``file:line`` of every ``sys.path`` edit under the path-hack-free packages."""
    found = []
    for directory in PATH_HACK_FREE_DIRS:
        for path in sorted((root / directory).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if SYS_PATH_EDIT.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


@pytest.mark.parametrize(
    ("line", "is_edit"),
    [
        ("sys.path[0] = str(TESTS)", True),
        ("sys.path[0:0] = [str(TESTS)]", True),
        ("sys.path.insert(0, here)", True),
        ("sys.path.append(here)", True),
        ("print(sys.path)", False),
        ("paths = list(sys.path)", False),
    ],
)
def test_sys_path_edit_pattern(tmp_path: Path, line: str, is_edit: bool) -> None:
    """The pattern tells an edit of ``sys.path`` from a read of it."""
    target = tmp_path / "tests" / "bench" / "bench_x.py"
    target.parent.mkdir(parents=True)
    target.write_text(f"import sys\n{line}\n", encoding="utf-8")

    assert sys_path_edits(tmp_path) == ([f"tests/bench/bench_x.py:2: {line}"] if is_edit else [])


def test_lab_and_benchmarks_edit_no_sys_path() -> None:
    """The lab and the benchmarks are packages run with ``-m``; no file of theirs patches the import path."""
    edits = sys_path_edits(REPO_ROOT)
    assert not edits, "run the file with PYTHONPATH=tests python -m ... instead:\n" + "\n".join(edits)
