# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SSH host key an install gets: given by the user, or generated on the controller and kept per generation.

Why: the controller must know the host's SSH key before it first connects, so it pins the key in known_hosts
instead of trusting whatever answers on the node's address (trust on first use). So the key pair is made here,
written into the ISO, and its public half returned. A reinstall (a new claim generation) gets a new key; the
same generation keeps its key, so a re-run builds the same ISO. Ed25519 only: one small key type every
supported installer's OpenSSH accepts.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._common.files import write_private_file

CRYPTOGRAPHY_IMPORT_ERROR: str | None
try:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
except ImportError:
    CRYPTOGRAPHY_IMPORT_ERROR = traceback.format_exc()
else:
    CRYPTOGRAPHY_IMPORT_ERROR = None


@dataclass(frozen=True)
class HostKey:
    private: str  # OpenSSH PEM; a secret
    public: str  # "ssh-ed25519 AAAA... comment"


def _public_line(key: Ed25519PrivateKey, comment: str) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return f"{raw.decode()} {comment}".strip()


def parse_host_key(private: str, comment: str) -> HostKey:
    """An Ed25519 private key in OpenSSH format, with its public line; InputError (no key text) otherwise."""
    try:
        key = serialization.load_ssh_private_key(private.encode(), password=None)
    except (ValueError, TypeError):
        raise InputError("ssh_host_key", "is not an unencrypted OpenSSH private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError("ssh_host_key", "must be an Ed25519 key (ssh-keygen -t ed25519)")
    # The text as given, not serialised again: OpenSSH's format carries a random check integer, so a fresh
    # serialisation would change the ISO on every run.
    return HostKey(private.strip() + "\n", _public_line(key, comment))


def generate_host_key(comment: str) -> HostKey:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    return HostKey(pem.decode(), _public_line(key, comment))


def key_file(dest: Path, generation: int) -> Path:
    """Where a generated key is kept: beside the ISO, named by the claim's generation."""
    return dest.with_name(f"{dest.name}.gen{generation}.ssh_host_ed25519_key")


def kept_or_new_host_key(dest: Path, generation: int, comment: str, *, write: bool) -> tuple[HostKey, bool]:
    """The generation's kept key, or a new one (written 0600 when ``write``); True when it is new."""
    path = key_file(dest, generation)
    if path.is_file():
        return parse_host_key(path.read_text(), comment), False
    key = generate_host_key(comment)
    if write:
        write_private_file(path, key.private.encode())
        for stale in dest.parent.glob(f"{dest.name}.gen*.ssh_host_ed25519_key"):
            if stale != path:  # an older generation's key: that install is being replaced
                stale.unlink()
    return key, True
