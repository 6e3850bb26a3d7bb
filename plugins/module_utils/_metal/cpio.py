# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A byte-reproducible newc cpio archive: the preseed initrd the Debian installer reads.

Why: debian-installer reads a ``/preseed.cfg`` from its initrd before anything else (before asking for a
language or mounting the CD), so preseeding from the initrd is the one way that works for every question and
for netboot-built ISOs whose initrd never mounts the CD. The boot loaders load this archive as a second
initrd; the kernel unpacks concatenated archives in order (Documentation/driver-api/early-userspace/
buffer-format.rst). Fixed inode numbers, owner and mtime make the same files give the same bytes.
"""

from __future__ import annotations

NEWC_MAGIC = b"070701"
TRAILER = "TRAILER!!!"
FILE_MODE = 0o100600  # regular file, root only: the archive carries the root password hash and host key
DIR_MODE = 0o040755


def _member(name: str, data: bytes, mode: int, inode: int) -> bytes:
    encoded = name.encode() + b"\0"
    fields = (inode, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0)
    header = NEWC_MAGIC + b"".join(f"{value:08x}".encode() for value in fields)
    return header + encoded + b"\0" * (-(len(header) + len(encoded)) % 4) + data + b"\0" * (-len(data) % 4)


def newc_archive(files: dict[str, bytes]) -> bytes:
    """An uncompressed newc archive of ``files`` (relative paths), directories first, names sorted."""
    directories = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
    parts = [_member(d, b"", DIR_MODE, i + 1) for i, d in enumerate(directories)]
    parts += [_member(name, files[name], FILE_MODE, len(directories) + i + 1) for i, name in enumerate(sorted(files))]
    parts.append(_member(TRAILER, b"", 0, 0))
    return b"".join(parts)


def read_newc(archive: bytes) -> dict[str, bytes]:
    """The regular files of a newc archive (for checks and tests)."""
    files: dict[str, bytes] = {}
    offset = 0
    while offset < len(archive):
        if archive[offset : offset + 6] != NEWC_MAGIC:
            raise ValueError(f"no newc header at byte {offset}")
        fields = [int(archive[offset + 6 + 8 * i : offset + 14 + 8 * i], 16) for i in range(13)]
        mode, size, name_size = fields[1], fields[6], fields[11]
        name_start = offset + 110
        name = archive[name_start : name_start + name_size - 1].decode()
        data_start = name_start + name_size + (-(110 + name_size) % 4)
        if name == TRAILER:
            break
        if mode & 0o170000 == 0o100000:
            files[name] = archive[data_start : data_start + size]
        offset = data_start + size + (-size % 4)
    return files
