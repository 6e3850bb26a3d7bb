"""The collection as users receive it: the built tarball, ansible-doc, the EE definition, the docs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from support.collection import REPO_ROOT, ansible_env

BIN = Path(sys.executable).parent
# Nothing a developer's machine or a test run leaves in the tree may reach users.
FORBIDDEN_PARTS = {
    ".venv",
    ".venv-core2.19",
    ".venv-core2.20",
    "__pycache__",
    ".build",
    ".ansible",
    ".pytest_cache",
    ".ruff_cache",
}
FORBIDDEN_PREFIXES = ("tests/output", "inventories/lab/.state", "dist/", "collections/", "changelogs/.plugin-cache")
# Caches that tools leave below the top level (pytest run from a subdirectory, ansible-lint and molecule
# in a role or scenario, antsibull-changelog's plugin cache), planted in a copy of the checkout.
NESTED_LEFTOVERS = (
    "plugins/modules/.pytest_cache/v/cache/nodeids",
    "tests/unit/plugins/.pytest_cache/README.md",
    "roles/vke_cluster/.ansible/tmp/lint.yml",
    "extensions/molecule/lab/.ansible/roles/x.yml",
    "plugins/module_utils/_common/__pycache__/errors.cpython-313.pyc",
    "tests/lab/__pycache__/common.txt",
    "plugins/.ruff_cache/0.8.0/cache",
    "changelogs/.plugin-cache.yaml",
)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out)],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        env=ansible_env(),
    )
    version = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())["version"]
    return out / f"metalplane-inference-{version}.tar.gz"


def test_tarball_holds_no_caches_virtualenvs_or_test_output(tarball: Path) -> None:
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    leaked = [
        n
        for n in names
        if FORBIDDEN_PARTS & set(Path(n).parts) or n.startswith(FORBIDDEN_PREFIXES) or n.endswith(".pyc")
    ]
    assert leaked == []
    assert "MANIFEST.json" in names
    assert "meta/runtime.yml" in names
    assert "requirements.txt" in names


def test_nested_caches_are_not_packed(tmp_path: Path) -> None:
    """build_ignore patterns match nested caches too, not only those at the top level."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    copy = tmp_path / "inference"
    for rel in filter(None, listed.split("\0")):
        source = REPO_ROOT / rel
        if source.is_file():  # a file deleted but not yet committed is still listed
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / rel)
    for rel in NESTED_LEFTOVERS:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_text("leftover\n")
    out = tmp_path / "dist"
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(copy)],
        check=True,
        capture_output=True,
        env=ansible_env(),
    )
    with tarfile.open(next(out.glob("*.tar.gz"))) as tar:
        names = set(tar.getnames())
    assert "plugins/module_utils/_common/errors.py" in names, "the copy must be packed"
    assert sorted(rel for rel in NESTED_LEFTOVERS if rel in names) == []
    leaked = [n for n in names if FORBIDDEN_PARTS & set(Path(n).parts) or n.startswith(FORBIDDEN_PREFIXES)]
    assert leaked == []


def test_ansible_doc_lists_every_module_that_exists() -> None:
    listed = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "module", "-l", "metalplane.inference", "--json"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        text=True,
        env=ansible_env(),
    ).stdout
    on_disk = {f"metalplane.inference.{p.stem}" for p in (REPO_ROOT / "plugins" / "modules").glob("*.py")}
    on_disk.discard("metalplane.inference.__init__")
    assert set(json.loads(listed)) == on_disk


def test_action_groups_name_existing_modules_and_cover_them_all() -> None:
    runtime = yaml.safe_load((REPO_ROOT / "meta" / "runtime.yml").read_text())
    grouped = {m for members in runtime["action_groups"].values() for m in members}
    modules = {p.stem for p in (REPO_ROOT / "plugins" / "modules").glob("*.py")} - {"__init__"}
    assert grouped <= modules, f"groups name missing modules: {sorted(grouped - modules)}"
    assert modules <= grouped, f"modules without an action group: {sorted(modules - grouped)}"


def test_module_reference_is_current() -> None:
    check = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "gen-module-docs.py"), "--check"],
        capture_output=True,
        text=True,
        env=ansible_env(),
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_ansible_builder_accepts_the_execution_environment(tarball: Path, tmp_path: Path) -> None:
    (tmp_path / "dist").mkdir()
    shutil.copy(tarball, tmp_path / "dist" / tarball.name)
    shutil.copy(REPO_ROOT / "execution-environment.yml", tmp_path)
    result = subprocess.run(
        [str(BIN / "ansible-builder"), "create", "-f", "execution-environment.yml", "-c", "context"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    containerfile = next((tmp_path / "context").glob("*file")).read_text()
    assert "ansible-galaxy collection install" in containerfile
    galaxy = yaml.safe_load((tmp_path / "context" / "_build" / "requirements.yml").read_text())
    names = [collection["name"] for collection in galaxy["collections"]]
    assert names == [f"collections/{tarball.name}", "kubernetes.core"]
    assert (tmp_path / "context" / "_build" / "collections" / tarball.name).is_file()
    assert "helm" in containerfile  # kubernetes.core.helm's binary


def test_the_collection_in_an_ee_brings_its_python_and_system_requirements(tarball: Path, tmp_path: Path) -> None:
    """What the image build resolves (``ansible-builder introspect``, the step the build runs once the collections
    are installed): the installed tarball's Python requirements (sushy, pycdlib, pyfatfs, vultr-python, kubernetes)
    and its system packages (the SSH client)."""
    installed = tmp_path / "collections"
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(installed), str(tarball)],
        check=True,
        capture_output=True,
        env=ansible_env(ANSIBLE_COLLECTIONS_PATH=str(installed)),
    )
    result = subprocess.run(
        [str(BIN / "ansible-builder"), "introspect", str(installed)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    found = yaml.safe_load(result.stdout)
    ours = "# from collection metalplane.inference"
    python = {line.split()[0] for line in found["python"] if line.endswith(ours)}
    for requirement in ("sushy>=5.14.0,<5.15", "pycdlib>=1.22.0", "pyfatfs>=1.1.0", "vultr-python>=0.2.0,<0.3"):
        assert requirement in python, (requirement, found["python"])
    assert {"kubernetes>=24.2.0", "cryptography>=42.0"} <= python
    system = [line.removesuffix(ours).strip() for line in found["system"] if line.endswith(ours)]
    assert system == ["openssh-clients [platform:rpm]", "openssh-client [platform:dpkg]"]
