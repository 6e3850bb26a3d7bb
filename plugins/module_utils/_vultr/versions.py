# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes version requests (``v1.36.2+1``, ``1.36``, ``latest``) -> a VKE version string.

Why: VKE versions look like ``vMAJOR.MINOR.PATCH+N`` and old ones disappear from
``GET /kubernetes/versions``; inventories should be able to say "1.36" or "latest" and get the
newest matching build, while an exact string is taken literally. Pure functions, unit-tested.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

LATEST = "latest"
_VERSION_RE = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\+(\d+))?$")


def version_key(version: str) -> tuple[int, ...] | None:
    """Sortable key of a VKE version string, or None if it is not one."""
    match = _VERSION_RE.match(version.strip())
    if not match:
        return None
    return tuple(int(part) if part is not None else -1 for part in match.groups())


def is_exact(requested: str) -> bool:
    """``v1.36.2+1`` / ``1.36.2+1``: a full build string, used as is."""
    key = version_key(requested)
    return key is not None and all(part >= 0 for part in key)


def normalise(version: str) -> str:
    """Vultr's spelling: leading ``v``."""
    version = version.strip()
    return version if version.startswith("v") else f"v{version}"


def matches(requested: str, version: str) -> bool:
    """Whether ``version`` (a VKE build string) satisfies ``requested`` (exact or prefix)."""
    if requested == LATEST:
        return True
    want = version_key(requested)
    have = version_key(version)
    if want is None or have is None:
        return False
    return all(w in (-1, h) for w, h in zip(want, have, strict=True))


def resolve_version(requested: str, available: Iterable[str]) -> str:
    """The newest available version satisfying ``requested``; ``InputError`` if there is none."""
    requested = requested.strip()
    if requested != LATEST and version_key(requested) is None:
        raise InputError("version", f"{requested!r} is not a Kubernetes version: use 'v1.36.2+1', '1.36' or 'latest'")
    candidates = [v for v in available if version_key(v) is not None and matches(requested, v)]
    if not candidates:
        listed = ", ".join(sorted(available, key=lambda v: version_key(v) or ())) or "none"
        raise InputError("version", f"no VKE version matches {requested!r}; available: {listed}")
    return max(candidates, key=lambda v: version_key(v) or ())
