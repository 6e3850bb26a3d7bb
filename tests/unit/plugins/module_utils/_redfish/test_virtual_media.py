"""The virtual media recovery ladder with small fakes (no network), plus slot selection."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError, NotFoundError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import (
    BmcNotReady,
    MediaError,
    RedfishError,
)
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.virtual_media import (
    Media,
    ensure,
    pick_slot,
    slots_to_eject,
    validate_image_url,
)

URL = "http://10.0.0.5/boot.iso"


class FakeBmc:
    """Scripted failures: ``fail_inserts`` fail the next N inserts; ``fail_until_reset`` all until a reset."""

    def __init__(self, fail_inserts: int = 0, fail_until_reset: bool = False, silent_until_reset: bool = False) -> None:
        self.fail_inserts = fail_inserts
        self.fail_until_reset = fail_until_reset
        self.silent_until_reset = silent_until_reset  # insert "succeeds" but never shows Inserted
        self.resets = 0
        self.inserts = 0
        self.ejects = 0
        self.slots = {
            "CD": {"inserted": False, "image": None, "types": ["CD", "DVD"]},
            "RemovableDisk": {"inserted": True, "image": "http://old/floppy.img", "types": ["USBStick"]},
        }


class FakeSlot:
    def __init__(self, bmc: FakeBmc, ident: str) -> None:
        self.bmc = bmc
        self.identity = ident
        self.name = ident
        self.path = f"/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/{ident}"
        self.write_protected = True
        self.connected_via = "URI"
        self.refresh()

    @property
    def media_types(self) -> list[str]:
        return self.bmc.slots[self.identity]["types"]

    def refresh(self, force: bool = True) -> None:
        state = self.bmc.slots[self.identity]
        self.inserted = state["inserted"]
        self.image = state["image"]

    def insert_media(self, url: str, inserted: bool = True, write_protected: bool = True) -> None:
        assert inserted
        assert write_protected
        self.bmc.inserts += 1
        if self.bmc.fail_until_reset:
            raise MediaError("VRM0021", category="media_recoverable", message_ids=["VRM0021"], status=400)
        if self.bmc.fail_inserts:
            self.bmc.fail_inserts -= 1
            raise MediaError("SYS446", category="media_recoverable", message_ids=["SYS446"], status=500)
        if self.bmc.silent_until_reset:
            return
        self.bmc.slots[self.identity].update(inserted=True, image=url)

    def eject_media(self) -> None:
        self.bmc.ejects += 1
        self.bmc.slots[self.identity].update(inserted=False, image=None)


class FakeQuirks:
    name = "fake"

    def __init__(self, bmc: FakeBmc) -> None:
        self.bmc = bmc
        self.listings = 0

    def virtual_media_slots(self, _client: Any) -> list[FakeSlot]:
        self.listings += 1
        return [FakeSlot(self.bmc, ident) for ident in self.bmc.slots]

    def reset_bmc(self, _client: Any) -> str:
        self.bmc.resets += 1
        self.bmc.fail_until_reset = False
        self.bmc.silent_until_reset = False
        return "Manager.Reset GracefulRestart"


class FakeClient:
    def __init__(self, bmc: FakeBmc) -> None:
        self.bmc = bmc
        self.ready_waits = 0

    def call(self, _doing: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def wait_ready(self, _timeout: float) -> int:
        self.ready_waits += 1
        return 1


def _media(bmc: FakeBmc, sleeps: list[float]) -> tuple[Media, FakeClient, FakeQuirks]:
    client, quirks = FakeClient(bmc), FakeQuirks(bmc)
    return Media(client, quirks, retry_delay=5, verify_timeout=0, sleep=sleeps.append), client, quirks


def test_clean_insert_needs_no_recovery() -> None:
    bmc, sleeps = FakeBmc(), []
    media, client, quirks = _media(bmc, sleeps)
    assert media.insert("CD", URL) == "none"
    assert (bmc.inserts, bmc.resets, client.ready_waits, quirks.listings) == (1, 0, 0, 1)
    assert bmc.slots["RemovableDisk"]["inserted"] is True  # nothing else touched


def test_sys446_once_recovers_by_eject_retry() -> None:
    bmc, sleeps = FakeBmc(fail_inserts=1), []
    media, client, _unused = _media(bmc, sleeps)
    assert media.insert("CD", URL) == "eject_retry"
    assert bmc.inserts == 2
    assert bmc.slots["RemovableDisk"]["inserted"] is False  # eject-all ran
    assert sleeps[0] == 5  # waited retry_delay before retrying
    assert bmc.resets == 0
    assert client.ready_waits == 0


def test_vrm0021_until_reset_recovers_by_bmc_reset() -> None:
    bmc, sleeps = FakeBmc(fail_until_reset=True), []
    media, client, quirks = _media(bmc, sleeps)
    assert media.insert("CD", URL) == "bmc_reset"
    assert (bmc.inserts, bmc.resets, client.ready_waits) == (3, 1, 1)
    assert quirks.listings == 2  # slots listed again after the re-login
    assert bmc.slots["CD"] == {"inserted": True, "image": URL, "types": ["CD", "DVD"]}


def test_silent_failure_is_caught_by_verification() -> None:
    bmc, sleeps = FakeBmc(silent_until_reset=True), []
    media, _unused, _unused2 = _media(bmc, sleeps)
    assert media.insert("CD", URL) == "bmc_reset"
    assert bmc.resets == 1


def test_max_recovery_limits_the_ladder() -> None:
    bmc = FakeBmc(fail_until_reset=True)
    media, _unused, _unused2 = _media(bmc, [])
    with pytest.raises(MediaError):
        media.insert("CD", URL, max_recovery="eject_retry")
    assert bmc.resets == 0
    bmc2 = FakeBmc(fail_inserts=1)
    media2, _unused, _unused2 = _media(bmc2, [])
    with pytest.raises(MediaError):
        media2.insert("CD", URL, max_recovery="none")
    assert bmc2.inserts == 1


def test_failure_after_reset_says_what_was_tried() -> None:
    bmc = FakeBmc(fail_inserts=99)
    media, _unused, _unused2 = _media(bmc, [])
    with pytest.raises(MediaError) as info:
        media.insert("CD", URL)
    assert "after eject+retry and a BMC reset" in info.value.msg
    assert info.value.details["recovery_tried"] == ["eject_retry", "bmc_reset"]
    assert bmc.inserts == 3
    assert bmc.resets == 1


def test_unrelated_errors_do_not_climb() -> None:
    bmc = FakeBmc()
    media, _unused, _unused2 = _media(bmc, [])

    def boom(*_a: Any, **_k: Any) -> None:
        raise RedfishError("400 PropertyValueNotInList", category="invalid")

    FakeSlot.insert_media_orig = FakeSlot.insert_media  # type: ignore[attr-defined]
    try:
        FakeSlot.insert_media = boom  # type: ignore[assignment,method-assign]
        with pytest.raises(RedfishError):
            media.insert("CD", URL)
    finally:
        FakeSlot.insert_media = FakeSlot.insert_media_orig  # type: ignore[attr-defined,method-assign]
    assert bmc.resets == 0


def test_503_counts_as_recoverable() -> None:
    assert issubclass(BmcNotReady, RedfishError)
    bmc = FakeBmc()
    media, _unused, _unused2 = _media(bmc, [])
    calls = {"n": 0}
    original = FakeSlot.insert_media

    def flaky(self: FakeSlot, url: str, **kw: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise BmcNotReady("503", category="not_ready", status=503)
        original(self, url, **kw)

    FakeSlot.insert_media = flaky  # type: ignore[method-assign]
    try:
        assert media.insert("CD", URL) == "eject_retry"
    finally:
        FakeSlot.insert_media = original  # type: ignore[method-assign]


def _params(**kw: Any) -> dict[str, Any]:
    base = {
        "state": "inserted",
        "image_url": URL,
        "slot": None,
        "media_type": None,
        "max_recovery": "bmc_reset",
        "retry_delay": 0,
        "verify_timeout": 0,
    }
    base.update(kw)
    return base


def test_ensure_is_idempotent_and_check_mode_changes_nothing() -> None:
    bmc = FakeBmc()
    client, quirks = FakeClient(bmc), FakeQuirks(bmc)
    planned = ensure(client, quirks, _params(), check_mode=True, sleep=lambda _s: None)
    assert planned["changed"] is True
    assert bmc.inserts == 0
    assert planned["diff"]["after"]["slots"]["CD"] == {"inserted": True, "image": URL}
    done = ensure(client, quirks, _params(), check_mode=False, sleep=lambda _s: None)
    assert (done["changed"], done["recovered_by"], bmc.inserts) == (True, "none", 1)
    again = ensure(client, quirks, _params(), check_mode=False, sleep=lambda _s: None)
    assert (again["changed"], bmc.inserts) == (False, 1)


def test_ensure_ejects_all_or_one() -> None:
    bmc = FakeBmc()
    bmc.slots["CD"].update(inserted=True, image=URL)
    client, quirks = FakeClient(bmc), FakeQuirks(bmc)
    one = ensure(client, quirks, _params(state="ejected", image_url=None, slot="CD"), check_mode=False)
    assert one["ejected"] == ["CD"]
    assert bmc.slots["RemovableDisk"]["inserted"] is True
    rest = ensure(client, quirks, _params(state="ejected", image_url=None), check_mode=False)
    assert rest["ejected"] == ["RemovableDisk"]
    none = ensure(client, quirks, _params(state="ejected", image_url=None), check_mode=False)
    assert none["changed"] is False


def test_insert_replaces_another_image() -> None:
    bmc = FakeBmc()
    bmc.slots["CD"].update(inserted=True, image="http://old/other.iso")
    client, quirks = FakeClient(bmc), FakeQuirks(bmc)
    done = ensure(client, quirks, _params(), check_mode=False, sleep=lambda _s: None)
    assert done["steps"][:2] == ["eject CD", "insert CD"]
    assert bmc.slots["CD"]["image"] == URL


@pytest.mark.parametrize("url", ["nfs://host/iso", "file:///tmp/x.iso", "ftp://h/x.iso", "http://", "", None])
def test_validate_image_url_rejects(url: str | None) -> None:
    with pytest.raises(InputError) as info:
        validate_image_url(url)
    assert info.value.field == "image_url"


def test_pick_slot_and_eject_selection() -> None:
    slots = [
        {"id": "RemovableDisk", "media_types": ["USBStick"], "inserted": True},
        {"id": "CD", "media_types": ["CD", "DVD"], "inserted": False},
    ]
    assert pick_slot(slots, None, None)["id"] == "CD"
    assert pick_slot(slots, None, "removable_disk")["id"] == "RemovableDisk"
    assert pick_slot(slots, "CD", None)["id"] == "CD"
    with pytest.raises(NotFoundError):
        pick_slot(slots, "1", None)
    assert [s["id"] for s in slots_to_eject(slots, None, None)] == ["RemovableDisk"]
    assert slots_to_eject(slots, None, "cd") == []
