"""Where the platforms' own contracts live: the shared reference tree, never copied into the repo.

The Vultr OpenAPI overlay, Modelplane's XRD schemas and examples are the platforms' documents, not
ours, so the tests read them in place (``../shared/reference`` next to the checkout, or the directory
named by ``METALPLANE_REFERENCE_DIR``). A machine without them still runs every other test; the tests
that need them skip with one recognisable reason, the session summary says how many did, and
``METALPLANE_REQUIRE_REFERENCE=1`` turns those skips into failures for a lane that must check them.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
REFERENCE_DIR = Path(os.environ.get("METALPLANE_REFERENCE_DIR") or REPO_ROOT.parent / "shared" / "reference")

# Every skip for a missing reference document starts with this, so conftest can count them.
SKIP_PREFIX = "reference tree absent:"


def reference_path(*parts: str) -> Path:
    """A path inside the reference tree (it may not exist; see ``require``)."""
    return REFERENCE_DIR.joinpath(*parts)


def require(path: Path, what: str) -> Path:
    """Return ``path`` if it exists; otherwise skip (or fail, when the reference is required)."""
    if path.exists():
        return path
    import pytest

    message = f"{SKIP_PREFIX} {what} not found at {path} (set METALPLANE_REFERENCE_DIR or check out ../shared)"
    if os.environ.get("METALPLANE_REQUIRE_REFERENCE") == "1":
        pytest.fail(message)
    pytest.skip(message)
    return path  # not reached: pytest.skip raises
