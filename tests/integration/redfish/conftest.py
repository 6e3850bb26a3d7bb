"""Fixtures for the Redfish module tests: one RedfishLab with a BMC per personality, an image server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from integration.redfish.images import ImageServer

from lab.redfish import BmcSpec, RedfishLab

PERSONALITIES = ("idrac8", "idrac9", "generic")


@pytest.fixture(scope="module")
def redfish_lab() -> Iterator[RedfishLab]:
    bmcs = [BmcSpec(name=f"{p}-1", personality=p, power_state="Off") for p in PERSONALITIES]
    lab = RedfishLab(bmcs=bmcs, delay_scale=0.0).start()
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope="module")
def images() -> Iterator[ImageServer]:
    server = ImageServer().start()
    try:
        yield server
    finally:
        server.stop()


def conn(lab: RedfishLab, name: str, **overrides: Any) -> dict[str, Any]:
    """The shared connection options of a module for one lab BMC."""
    return {
        "bmc_url": lab.url(name),
        "username": "root",
        "password": "calvin",
        "ca_path": lab.ca_path,
        **overrides,
    }
