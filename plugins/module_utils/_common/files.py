# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing secret-bearing files (kubeconfigs) safely and idempotently.

Why: a kubeconfig holds cluster-admin credentials. It must never exist with looser permissions,
even for an instant, and rewriting the same content must not count as a change (so a second
playbook run reports ``changed=0``).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

PRIVATE_FILE_MODE = 0o600  # owner read/write only: the file carries credentials
PRIVATE_DIR_MODE = 0o700  # a directory created for such a file: nobody else lists or enters it


def file_digest(path: Path) -> str | None:
    """SHA-256 of a file's content, or None if it does not exist."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def private_file_needs_update(path: Path, content: bytes) -> bool:
    """True when ``path`` is missing, differs from ``content`` or is not mode 0600."""
    if file_digest(path) != hashlib.sha256(content).hexdigest():
        return True
    return (path.stat().st_mode & 0o777) != PRIVATE_FILE_MODE


def directory_mode(path: Path) -> str | None:
    """A directory's permission bits as four octal digits (``"0700"``), or None when it does not exist."""
    try:
        return f"{path.stat().st_mode & 0o7777:04o}"
    except FileNotFoundError:
        return None


def write_private_file(path: Path, content: bytes) -> bool:
    """Atomically write ``content`` with mode 0600; return whether anything changed.

    The temporary file is created 0600 in the target directory and renamed over the target,
    so readers see either the old or the new file, never a partial or world-readable one.
    """
    if not private_file_needs_update(path, content):
        return False
    path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True
