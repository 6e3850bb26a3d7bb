"""Fixtures for the Redfish module tests: one RedfishLab with a BMC per personality, an image server."""

from __future__ import annotations

from collections.abc import Iterator

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
