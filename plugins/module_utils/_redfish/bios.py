# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the BIOS settings a GPU driver install depends on: Secure Boot, boot mode, MMIO above 4 GB.

Why: each one, when wrong, fails the install late (an unsigned module refused at ``modprobe``, an
installer booted in the wrong mode, a GPU whose BAR the firmware could not place), and each can
be read over Redfish before anything is touched. The quirks package says where each BMC family
keeps them (``quirks/bios_settings.py``); this module only reads: the ``Bios`` resource once (when a
setting lives there), the ``SecureBoot`` resource once (when it does), nothing else. A setting the
BMC does not expose reads as None, never as an error: the preflight decides what unknown means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError

from .quirks.bios_settings import BIOS_ATTRIBUTE, SECURE_BOOT_RESOURCE, SYSTEM_BOOT, BiosSettings, BiosSource

CONCERNS = ("secure_boot", "boot_mode", "mmio_above_4gb")


@dataclass(frozen=True)
class BiosReading:
    """The three settings (None = not exposed or an unknown value), where each was read, and the raw values."""

    secure_boot: bool | None = None
    boot_mode: str | None = None  # "UEFI" or "Legacy"
    mmio_above_4gb: bool | None = None
    where: dict[str, str] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "secure_boot": self.secure_boot,
            "boot_mode": self.boot_mode,
            "mmio_above_4gb": self.mmio_above_4gb,
            "read_from": dict(self.where),
            "raw": dict(self.raw),
        }


def _value(source: BiosSource, documents: dict[str, dict[str, Any] | None]) -> tuple[Any, Any]:
    """(meaning, raw value) of one setting from the documents read; (None, None) when absent."""
    document = documents.get(source.kind)
    if not document:
        return None, None
    container = (document.get("Attributes") or {}) if source.kind == BIOS_ATTRIBUTE else document
    if source.name not in container:
        return None, None
    raw = container[source.name]
    return source.values.get(raw), raw


def reading_from(settings: BiosSettings, documents: dict[str, dict[str, Any] | None]) -> BiosReading:
    """Pure: the reading from the documents by kind (``Bios.Attributes``: the Bios resource,
    ``SecureBoot``: the SecureBoot resource, ``Boot``: the System's ``Boot`` object)."""
    values: dict[str, Any] = {}
    where: dict[str, str] = {}
    raw: dict[str, Any] = {}
    for concern in CONCERNS:
        source: BiosSource | None = getattr(settings, concern)
        if source is None:
            values[concern] = None
            continue
        where[concern] = source.where
        values[concern], raw_value = _value(source, documents)
        if raw_value is not None:
            raw[source.where] = raw_value
    return BiosReading(where=where, raw=raw, **values)


def _kinds(settings: BiosSettings) -> set[str]:
    return {s.kind for s in (settings.secure_boot, settings.boot_mode, settings.mmio_above_4gb) if s is not None}


def read_bios(client: Any, settings: BiosSettings) -> BiosReading:
    """Read what ``settings`` names from an open ``RedfishClient`` (the System is already read)."""
    system = client.system.json
    kinds = _kinds(settings)
    documents: dict[str, dict[str, Any] | None] = {SYSTEM_BOOT: system.get("Boot") or {}}
    links = {BIOS_ATTRIBUTE: "Bios", SECURE_BOOT_RESOURCE: "SecureBoot"}
    for kind, link_name in links.items():
        link = (system.get(link_name) or {}).get("@odata.id")
        if kind not in kinds or not link:
            documents[kind] = None
            continue
        try:
            documents[kind] = client.get_json(link, f"Reading the {link_name} resource")
        except MetalplaneError:
            documents[kind] = None  # not readable here (e.g. a 404 on a BMC without it): unknown, not a failure
    return reading_from(settings, documents)
