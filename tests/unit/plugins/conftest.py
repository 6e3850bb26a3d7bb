"""Fixtures shared by the plugin unit tests: vendor-shaped installer ISOs, built once per session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from support.vendor_isos import build_shape


@pytest.fixture(scope="session")
def vendor_iso(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``vendor_iso("el10" | "ubuntu2404" | "debian12")``: the shape's ISO (skips without `make bootloaders`)."""
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            path = tmp_path_factory.mktemp("vendor-isos") / f"{name}.iso"
            build_shape(name, path)
            built[name] = path
        return built[name]

    return get
