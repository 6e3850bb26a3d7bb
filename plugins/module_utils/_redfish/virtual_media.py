# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Virtual media insert/eject with verification and the iDRAC recovery ladder.

Why: on iDRAC8 a mount regularly fails (``SYS446``, ``RAC0904``, ``VRM0021``, InternalError) or
"succeeds" without the slot ever reporting ``Inserted``, until stale handles are ejected or the
iDRAC is restarted; operators fix it by hand today. Here every insert is verified, and a known
failure climbs a ladder: (1) eject every slot, wait, retry; (2) reset the BMC, wait until it serves
again (a 401 counts as up; SYS518/SWC0700/503 mean wait), log in again, retry once. The result's
``recovered_by`` (none | eject_retry | bmc_reset) says which rung was needed. The ladder is the one
openstack/ironic (``redfish/boot.py``), microsoft/lisa (``idrac.py``, ``_reset_idrac``) and
dellemc.openmanage (``idrac_reset``: a 401 counts as up) use.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    InputError,
    NotFoundError,
    WaitTimeout,
)
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for

from .errors import BmcNotReady, MediaError
from .quirks import BootOps

RUNGS = ("none", "eject_retry", "bmc_reset")
MEDIA_TYPES = {  # module media_type -> Redfish MediaTypes that qualify a slot
    "cd": ("CD", "DVD"),
    "removable_disk": ("USBStick", "Floppy"),
}
VERIFY_BACKOFF = Backoff(initial=1.0, cap=5.0, factor=1.5, jitter=0.1)
RECOVERABLE = (MediaError, BmcNotReady)


def validate_image_url(image_url: str | None) -> str:
    if not image_url:
        raise InputError("image_url", "is required when state=inserted")
    parts = urlsplit(image_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            "image_url",
            f"{image_url!r} must be an http:// or https:// URL the BMC can reach (NFS/CIFS are not supported)",
        )
    return image_url


def slot_info(slot: Any) -> dict[str, Any]:
    return {
        "id": slot.identity,
        "name": slot.name,
        "media_types": [getattr(m, "value", str(m)) for m in slot.media_types or []],
        "inserted": bool(slot.inserted),
        "image": slot.image or None,
        "write_protected": slot.write_protected,
        "connected_via": getattr(slot.connected_via, "value", slot.connected_via),
        "path": slot.path,
    }


def pick_slot(slots: list[dict[str, Any]], slot_id: str | None, media_type: str | None) -> dict[str, Any]:
    """Pure: the slot to insert into (by id, else the first one supporting the media type)."""
    if slot_id:
        for slot in slots:
            if slot["id"] == slot_id:
                return slot
        raise NotFoundError(f"slot {slot_id!r} not found; the BMC has {[s['id'] for s in slots]}")
    wanted = MEDIA_TYPES[media_type or "cd"]
    for slot in slots:
        if any(m in wanted for m in slot["media_types"]):
            return slot
    raise NotFoundError(f"no virtual media slot supports {media_type or 'cd'}; slots: {[s['id'] for s in slots]}")


def slots_to_eject(slots: list[dict[str, Any]], slot_id: str | None, media_type: str | None) -> list[dict[str, Any]]:
    """Pure: the inserted slots that ``state=ejected`` must eject."""
    if slot_id:
        chosen = [pick_slot(slots, slot_id, None)]
    elif media_type:
        chosen = [s for s in slots if any(m in MEDIA_TYPES[media_type] for m in s["media_types"])]
    else:
        chosen = slots
    return [s for s in chosen if s["inserted"]]


class Media:
    """Insert/eject for one open client, with the ladder; ``sleep`` is injectable for tests."""

    def __init__(
        self,
        client: Any,
        quirks: BootOps,
        *,
        retry_delay: float = 5.0,
        verify_timeout: float = 30.0,
        ready_timeout: float = 600.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.quirks = quirks
        self.retry_delay = retry_delay
        self.verify_timeout = verify_timeout
        self.ready_timeout = ready_timeout
        self.sleep = sleep
        self.steps: list[str] = []
        self._cache: dict[str, Any] | None = None  # slot id -> sushy VirtualMedia (one listing per login)

    # -- reading ---------------------------------------------------------------------------
    def slots(self) -> list[Any]:
        if self._cache is None:
            self._cache = {slot.identity: slot for slot in self.quirks.virtual_media_slots(self.client)}
        return list(self._cache.values())

    def infos(self) -> list[dict[str, Any]]:
        return [slot_info(s) for s in self.slots()]

    def _slot(self, slot_id: str) -> Any:
        for slot in self.slots():
            if slot.identity == slot_id:
                return slot
        raise NotFoundError(f"virtual media slot {slot_id!r} disappeared")

    # -- primitives ------------------------------------------------------------------------
    def eject(self, slot_id: str) -> None:
        slot = self._slot(slot_id)
        self.client.call(f"Ejecting virtual media from slot {slot_id}", slot.eject_media)
        self.steps.append(f"eject {slot_id}")
        self._verify(slot_id, lambda s: not s.inserted, "to report ejected")

    def eject_all(self, best_effort: bool = False) -> list[str]:
        ejected = []
        for slot in self.slots():
            if slot.inserted:
                try:
                    self.eject(slot.identity)
                    ejected.append(slot.identity)
                except (*RECOVERABLE, WaitTimeout):
                    if not best_effort:
                        raise
        return ejected

    def _verify(self, slot_id: str, check: Callable[[Any], bool], what: str) -> None:
        def observe() -> Poll[dict[str, Any]]:
            slot = self._slot(slot_id)
            slot.refresh(force=True)
            return Poll(check(slot), {"inserted": slot.inserted, "image": slot.image})

        try:
            wait_for(
                observe,
                timeout=self.verify_timeout,
                what=f"slot {slot_id} {what}",
                backoff=VERIFY_BACKOFF,
                sleep=self.sleep,
            )
        except WaitTimeout as exc:
            raise MediaError(f"Virtual media slot {slot_id} did not {what.replace('to ', '', 1)}: {exc.msg}") from exc

    def _insert_once(self, slot_id: str, image_url: str) -> None:
        slot = self._slot(slot_id)
        if slot.inserted and slot.image != image_url:
            self.eject(slot_id)
            slot = self._slot(slot_id)
        self.client.call(
            f"Inserting {image_url} into slot {slot_id}",
            slot.insert_media,
            image_url,
            inserted=True,
            write_protected=True,
        )
        self.steps.append(f"insert {slot_id}")
        self._verify(slot_id, lambda s: bool(s.inserted) and s.image == image_url, "to report the image inserted")

    # -- the ladder ------------------------------------------------------------------------
    def insert(self, slot_id: str, image_url: str, max_recovery: str = "bmc_reset") -> str:
        """Insert and verify, climbing the ladder up to ``max_recovery``; returns ``recovered_by``."""
        try:
            self._insert_once(slot_id, image_url)
            return "none"
        except RECOVERABLE as exc:
            first = exc
            if max_recovery == "none":
                raise
        self.steps.append(f"recover: eject all after {first.message_ids or first.category}")
        self.eject_all(best_effort=True)
        self.sleep(self.retry_delay)
        try:
            self._insert_once(slot_id, image_url)
            return "eject_retry"
        except RECOVERABLE as exc:
            second = exc
            if max_recovery != "bmc_reset":
                raise
        self.steps.append(f"recover: BMC reset after {second.message_ids or second.category}")
        self.steps.append(self.quirks.reset_bmc(self.client))
        polls = self.client.wait_ready(self.ready_timeout)
        self._cache = None  # the old slot objects belong to the closed session
        self.steps.append(f"BMC ready after {polls} polls")
        try:
            self._insert_once(slot_id, image_url)
        except RECOVERABLE as exc:
            exc.msg = f"{exc.msg} (still failing after eject+retry and a BMC reset)"
            exc.args = (exc.msg,)
            exc.details["recovery_tried"] = ["eject_retry", "bmc_reset"]
            raise
        return "bmc_reset"


def ensure(
    client: Any,
    quirks: BootOps,
    params: dict[str, Any],
    *,
    check_mode: bool,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The redfish_virtual_media module: state inserted/ejected, verified, with recovery."""
    state = params["state"]
    image_url = validate_image_url(params.get("image_url")) if state == "inserted" else None
    media = Media(
        client,
        quirks,
        retry_delay=float(params.get("retry_delay", 5)),
        verify_timeout=float(params.get("verify_timeout", 30)),
        ready_timeout=float(params.get("bmc_ready_timeout", 600)),
        sleep=sleep,
    )
    before = media.infos()
    result: dict[str, Any] = {"changed": False, "recovered_by": "none", "quirks": quirks.name}
    if state == "inserted":
        if image_url is None:  # the module's required_if guarantees it; keep the type checker honest
            raise InputError("image_url", "is required with state=inserted")
        target = pick_slot(before, params.get("slot"), params.get("media_type"))
        result["slot"] = target["id"]
        result["image_url"] = image_url
        if target["inserted"] and target["image"] == image_url:
            result["slots"] = before
            return result
        result["changed"] = True
        after = [
            dict(s, inserted=True, image=image_url, write_protected=True) if s["id"] == target["id"] else s
            for s in before
        ]
        result["diff"] = {"before": {"slots": _brief(before)}, "after": {"slots": _brief(after)}}
        if check_mode:
            result["slots"] = before
            return result
        result["recovered_by"] = media.insert(target["id"], image_url, params.get("max_recovery") or "bmc_reset")
    else:
        chosen = slots_to_eject(before, params.get("slot"), params.get("media_type"))
        result["ejected"] = [s["id"] for s in chosen]
        if not chosen:
            result["slots"] = before
            return result
        result["changed"] = True
        ids = {s["id"] for s in chosen}
        after = [dict(s, inserted=False, image=None) if s["id"] in ids else s for s in before]
        result["diff"] = {"before": {"slots": _brief(before)}, "after": {"slots": _brief(after)}}
        if check_mode:
            result["slots"] = before
            return result
        for slot in chosen:
            media.eject(slot["id"])
    result["steps"] = media.steps
    result["slots"] = media.infos()
    return result


def _brief(slots: list[dict[str, Any]]) -> dict[str, Any]:
    return {s["id"]: {"inserted": s["inserted"], "image": s["image"]} for s in slots}
