"""One contender of the claim race (a separate OS process): claims the pool's only host for its cluster each round.

Why a process and not a thread: the guarantee is about controllers on different machines, which share nothing
but the API server. Each process builds its own kubernetes client from the kubeconfig and runs the module's
claim code (``run_host_claim``) with a BMC that always fits, so the only arbiter is the Lease API.
"""

from __future__ import annotations

from typing import Any


class _Module:
    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.check_mode = False
        self.diff_mode = False

    def warn(self, _message: str) -> None:
        return None

    def require(self, _library: str, _traceback: str | None) -> None:
        return None


class _Bmc:
    def __init__(self, mac: str) -> None:
        self.mac = mac

    def inventory(self, _requirements: Any) -> Any:
        from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import Inventory

        return Inventory(model="PowerEdge R730", memory_gib=256.0, gpus=["Tesla V100-PCIE-32GB"] * 2, macs=[self.mac])

    def asset_tag(self) -> str:
        return ""

    def set_asset_tag(self, _value: str) -> None:
        return None

    def close(self) -> None:
        return None


class _Kept:
    """The process's one Lease store, warmed up (discovery done) so a round is only list + write; not closed."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def close(self) -> None:
        return None


def contend(params: dict[str, Any], rounds: int, start: Any, done: Any, results: Any) -> None:
    """Each round: wait at ``start`` with the other contender, claim, report the outcome, wait at ``done``.

    The outcome is ``("won", host)`` or ``(error kind, field, how)`` where ``how`` says whether this process
    lost on the Lease write itself (409) or already saw the winner's Lease when it listed the pool.
    """
    from support.collection import install_collection_finder

    install_collection_finder()
    from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError
    from ansible_collections.metalplane.inference.plugins.module_utils._metal.claim_run import (
        connect_store,
        run_host_claim,
    )
    from ansible_collections.metalplane.inference.plugins.module_utils._metal.claims import LEASE_API, LEASE_KIND

    store = connect_store(params)
    store.objects.resource(LEASE_API, LEASE_KIND)  # discovery now, not inside the race
    try:
        for round_number in range(rounds):
            start.wait()
            try:
                result = run_host_claim(
                    _Module(params), store_factory=lambda _p: _Kept(store), bmc_opener=lambda host: _Bmc(host.boot_mac)
                )
                outcome: tuple[Any, ...] = ("won", result["host"]["name"])
            except MetalplaneError as exc:
                skipped = exc.details.get("skipped_hosts") or [{}]
                how = "409" if "first" in str(skipped[0].get("reason", "")) else "listed"
                outcome = (exc.kind, getattr(exc, "field", ""), how)
            except Exception as exc:
                outcome = ("crash", repr(exc))
            results.put((round_number, params["cluster"], *outcome))
            done.wait()
    finally:
        store.close()
