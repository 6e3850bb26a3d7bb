"""Make ``ansible_collections.metalplane.inference`` importable from a plain checkout.

Why: ansible and Python both find a collection only under ``ansible_collections/<ns>/<name>``,
while this repository's root *is* the collection. A symlink under ``.build/collections`` gives
both a proper tree without copying, and installing Ansible's collection finder lets tests import
modules and module_utils exactly as ansible-core does.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS_ROOT = REPO_ROOT / ".build" / "collections"
COLLECTION_LINK = COLLECTIONS_ROOT / "ansible_collections" / "metalplane" / "inference"


def ensure_collection_tree() -> Path:
    """Create ``.build/collections/ansible_collections/metalplane/inference -> repo`` once."""
    COLLECTION_LINK.parent.mkdir(parents=True, exist_ok=True)
    if not COLLECTION_LINK.is_symlink():
        tmp = COLLECTION_LINK.with_name(f".inference.{os.getpid()}")
        tmp.symlink_to(REPO_ROOT, target_is_directory=True)
        try:
            tmp.rename(COLLECTION_LINK)
        except OSError:
            tmp.unlink()
    return COLLECTIONS_ROOT


def install_collection_finder() -> None:
    """Install ansible-core's collection loader so ``ansible_collections.*`` imports resolve."""
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    finder = _AnsibleCollectionFinder(paths=[str(ensure_collection_tree())], scan_sys_paths=True)
    finder._install()


def ansible_env(**overrides: str) -> dict[str, str]:
    """Environment for an ``ansible-playbook`` subprocess that uses this checkout's collection."""
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_COLLECTIONS_PATH": str(ensure_collection_tree()),
            "ANSIBLE_HOST_KEY_CHECKING": "false",
            "ANSIBLE_RETRY_FILES_ENABLED": "false",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_PYTHON_INTERPRETER": os.environ.get("METALPLANE_TEST_PYTHON", "auto_silent"),
        }
    )
    env.update(overrides)
    return env
