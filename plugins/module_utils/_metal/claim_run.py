# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bodies of ``host_claim`` and ``host_pool_info``: validate, read the pool's Leases once, ask BMCs, write.

Why this order: every input is checked before the first request (a typo never half-claims a host); the
pool's Leases are read with one list call; BMCs are asked only about hosts that are free and whose written
facts fit, one at a time in inventory order, and the first that answers and fits is claimed with an atomic
create (or a ``resourceVersion``-guarded update of a released Lease). Losing that write to another controller
(409) moves on to the next host. After a win the pool is listed again: if a second controller claimed another
host for the *same* cluster at the same moment, both keep the alphabetically first claim and release the
other, so a cluster never holds two hosts of a pool. The AssetTag hint is written with the same BMC
connection, after the Lease, and only over an empty tag or one this collection wrote (a person's asset tag
is never overwritten); failing to write it is a warning, because the Lease is the claim.
"""

from __future__ import annotations

import dataclasses
import getpass
import re
import socket
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ConflictError,
    InputError,
    MetalplaneError,
)
from ansible_collections.metalplane.inference.plugins.module_utils._kube import object_store
from ansible_collections.metalplane.inference.plugins.module_utils._kube.object_store import Conflict
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import refused_login_retries

from . import claims as c
from .pool import (
    Host,
    Inventory,
    Requirements,
    fact_mismatches,
    inventory_mismatches,
    parse_hosts,
    parse_requirements,
)

# AssetTag hint: "<prefix><cluster>". The prefix marks tags this collection wrote (and may overwrite or clear).
HINT_PREFIX = "mp:"
# Conflicting updates of one Lease (a generation bump, a release) are re-read and retried this often.
WRITE_ATTEMPTS = 4
_POOL_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_-]*[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAME_MAX = 63


class Bmc(Protocol):
    """An open connection to one host's BMC (``RedfishBmc``; the unit tests use a fake)."""

    def inventory(self, requirements: Requirements) -> Inventory: ...

    def asset_tag(self) -> str | None: ...

    def set_asset_tag(self, value: str) -> None: ...

    def close(self) -> None: ...


BmcOpener = Callable[[Host], Bmc]
StoreFactory = Callable[[Mapping[str, Any]], Any]


class RedfishBmc:
    """``Bmc`` over the Redfish modules' client: one login (Basic auth, no session left behind), the System
    read at login, PCIe devices and NICs for the inventory, an ETag-guarded PATCH of ``AssetTag``."""

    def __init__(self, host: Host, api_timeout: int, refused_login_retries: int = 0) -> None:
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import (
            ConnectionParams,
            parse_bmc_url,
        )
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.session import RedfishClient

        base_url, root_prefix = parse_bmc_url(host.bmc_url)
        verify: bool | str = host.validate_certs
        if verify and host.ca_cert:
            verify = host.ca_cert
        params = ConnectionParams(
            base_url=base_url,
            root_prefix=root_prefix,
            username=host.username,
            password=host.password,
            verify=verify,
            timeout=api_timeout,
            refused_login_retries=refused_login_retries,
        )
        self.client = RedfishClient(params)
        self.client.connect()

    def inventory(self, requirements: Requirements) -> Inventory:
        from .pool import read_inventory

        return read_inventory(self.client, requirements)

    def bios(self) -> Any:
        """The BIOS settings the driver preflight reads (``_redfish.bios.BiosReading``; GETs only)."""
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.bios import read_bios
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.detect import detect_quirks
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.quirks import for_name

        return read_bios(self.client, for_name(detect_quirks(self.client)).bios_settings)

    def asset_tag(self) -> str | None:
        return self.client.system.json.get("AssetTag")

    def set_asset_tag(self, value: str) -> None:
        from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import PreconditionFailed

        path = self.client.system_path()
        for attempt in range(2):
            _doc, etag = self.client.get_with_etag(path, "Reading the system's AssetTag")
            try:
                self.client.patch(path, {"AssetTag": value}, "Writing the system's AssetTag", etag=etag)
                break
            except PreconditionFailed:
                if attempt:
                    raise
        self.client.forget()

    def close(self) -> None:
        self.client.close()


def open_redfish(api_timeout: int, refused_login_retries: int = 0) -> BmcOpener:
    return lambda host: RedfishBmc(host, api_timeout, refused_login_retries)


def connect_store(params: Mapping[str, Any]) -> c.KubeLeaseStore:
    """A ``KubeLeaseStore`` on the Modelplane control plane (its kubeconfig, never K8S_AUTH_*)."""
    return c.KubeLeaseStore(object_store.connect(params))


def opened_store(module: Any, store_factory: StoreFactory | None = None) -> AbstractContextManager[Any]:
    """The claim store of one module run (``connect_store`` unless a test passes its own factory), closed after."""
    return object_store.opened_store(module, store_factory, connect_store)


def require_sushy(module: Any) -> None:
    """Fail naming the missing library before any request when the real Redfish client is needed."""
    from ansible_collections.metalplane.inference.plugins.module_utils._redfish.session import SUSHY_IMPORT_ERROR

    module.require("sushy", SUSHY_IMPORT_ERROR)


def default_claimer() -> str:
    """``user@hostname`` of this controller, recorded with a claim so a person knows whom to ask."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def hint_for(cluster: str) -> str:
    return f"{HINT_PREFIX}{cluster}"


def hint_action(current: str | None, wanted: str | None) -> str:
    """What to do with the AssetTag (pure): ``wanted`` None means release (clear our own hint only).

    ``unchanged`` (already so), ``write``, ``clear``, or ``kept`` (a tag a person wrote; never overwritten).
    """
    current = current or ""
    ours = current.startswith(HINT_PREFIX)
    if wanted is None:
        return "clear" if ours else "unchanged"
    if current == wanted:
        return "unchanged"
    return "write" if (not current or ours) else "kept"


# --------------------------------------------------------------------------------------------- inputs
class Inputs:
    """The validated options both modules share (every check runs before the first request)."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        if not params.get("kubeconfig"):
            raise InputError("kubeconfig", "the control plane's kubeconfig is required (or set MODELPLANE_KUBECONFIG)")
        pool = str(params.get("pool") or "")
        if len(pool) > NAME_MAX or not _POOL_NAME.match(pool):
            raise InputError(
                "pool",
                f"{pool!r} is not a pool name: letters, digits, '_' and '-', at most {NAME_MAX} characters "
                "(the <name> of inventory group pool_<name>)",
            )
        self.pool = pool
        self.hosts = parse_hosts(params.get("hosts"), pool)
        self.requirements = parse_requirements(
            {k: v for k, v in (params.get("requirements") or {}).items() if v is not None}
        )
        namespace = str(params.get("namespace") or c.DEFAULT_NAMESPACE)
        if len(namespace) > NAME_MAX or not _DNS_LABEL.match(namespace):
            raise InputError("namespace", f"{namespace!r} is not a namespace name (a DNS-1123 label)")
        self.namespace = namespace
        timeout = params.get("api_timeout")
        if timeout is None or int(timeout) <= 0:
            raise InputError("api_timeout", f"must be a positive number of seconds, got {timeout!r}")
        self.api_timeout = int(timeout)
        self.refused_login_retries = refused_login_retries(params.get("refused_login_retries"))

    def host(self, name: str) -> Host | None:
        return next((h for h in self.hosts if h.name == name), None)


def _cluster(params: Mapping[str, Any]) -> str:
    cluster = str(params.get("cluster") or "")
    if len(cluster) > NAME_MAX or not _DNS_LABEL.match(cluster):
        length = f" ({len(cluster)} characters)" if len(cluster) > NAME_MAX else ""
        raise InputError(
            "cluster",
            f"{cluster!r}{length} is not a cluster name: a DNS-1123 label (lower case, digits, '-'), at most "
            f"{NAME_MAX} characters",
        )
    return cluster


def _check_host_option(params: Mapping[str, Any], inputs: Inputs) -> None:
    """To claim a given host it must be in the pool; a release may name a host the pool no longer lists."""
    only = params.get("host")
    if only and (params.get("state") or "present") == "present" and inputs.host(only) is None:
        raise InputError("host", f"{only!r} is not one of the hosts of pool {inputs.pool!r}")


def _probe(open_bmc: BmcOpener, host: Host, requirements: Requirements) -> tuple[str, Any, Bmc | None]:
    """(``ok``, inventory, open bmc) / (``unreachable``, error) / (``mismatched``, reasons); the caller closes."""
    try:
        bmc = open_bmc(host)
    except MetalplaneError as exc:
        return "unreachable", exc.msg, None
    try:
        inventory = bmc.inventory(requirements)
    except MetalplaneError as exc:
        bmc.close()
        return "unreachable", exc.msg, None
    reasons = inventory_mismatches(requirements, inventory, host.boot_mac)
    if reasons:
        bmc.close()
        return "mismatched", {"reasons": reasons, "inventory": inventory.as_dict()}, None
    return "ok", inventory.as_dict(), bmc


# --------------------------------------------------------------------------------------------- host_claim
class ClaimRun:
    """One run of ``host_claim``."""

    def __init__(self, module: Any, store: Any, open_bmc: BmcOpener) -> None:
        params = module.params
        self.module = module
        self.inputs = Inputs(params)
        self.cluster = _cluster(params)
        self.store = store
        self.open_bmc = open_bmc
        self.check = bool(module.check_mode)
        self.force = bool(params.get("force"))
        self.reinstall = bool(params.get("reinstall"))
        self.bmc_hint = params.get("bmc_hint", True) is not False
        self.claimer = str(params.get("claimer") or default_claimer())
        self.only = params.get("host") or None
        self.state = params.get("state") or "present"
        _check_host_option(params, self.inputs)
        self.skipped: list[dict[str, Any]] = []
        self.hint: dict[str, Any] = {"status": "disabled" if not self.bmc_hint else "unchanged"}
        self.before: dict[str, Any] = {}
        self.after: dict[str, Any] = {}

    @property
    def ns(self) -> str:
        return self.inputs.namespace

    def _list(self) -> list[dict[str, Any]]:
        return self.store.list(self.ns, c.pool_selector(self.inputs.pool))

    # ---------------------------------------------------------------- present
    def present(self) -> dict[str, Any]:
        inputs = self.inputs
        listed = self._list()
        plan = c.choose_host(inputs.pool, inputs.hosts, listed, self.cluster, inputs.requirements)
        if plan.held:
            return self._keep(plan)
        if plan.strays:
            names = ", ".join(s.host or s.lease for s in plan.strays)
            raise ConflictError(
                f"cluster {self.cluster!r} already holds host(s) {names} of pool {inputs.pool!r}, which the hosts list"
                " no longer names; put them back in the pool or release them (state=absent, host=<name>)",
                details={"held": [s.public() for s in plan.strays]},
            )
        self.skipped.extend(plan.skipped)
        candidates = [h for h in plan.candidates if self.only is None or h.name == self.only]
        for host in candidates:
            status, detail, bmc = _probe(self.open_bmc, host, inputs.requirements)
            if bmc is None:
                entry = {"name": host.name, "status": status}
                if status == "unreachable":
                    entry["reason"] = str(detail)
                else:
                    entry.update(reason="; ".join(detail["reasons"]), inventory=detail["inventory"])
                self.skipped.append(entry)
                continue
            try:
                won = self._take(host, listed)
                if won is None:
                    continue
                if won.host != host.name:  # settled on the host a concurrent run claimed for this cluster
                    other = self.inputs.host(won.host) or host
                    bmc.close()
                    if self.bmc_hint:
                        self._refresh_hint(other)
                    return self._result(other, won, changed=True)
                if self.bmc_hint and not self.check:
                    self._write_hint(bmc, hint_for(self.cluster))
                elif self.bmc_hint:
                    self.hint = {"status": hint_action(bmc.asset_tag(), hint_for(self.cluster)), "planned": True}
            finally:
                bmc.close()
            return self._result(host, won, changed=True, inventory=detail)
        summary = "; ".join(f"{s['name']}: {s['status']} ({s['reason']})" for s in self.skipped) or "none listed"
        raise InputError(
            "pool",
            f"no free host of pool {inputs.pool!r} fits cluster {self.cluster!r}"
            f" (requirements {inputs.requirements.as_dict()}): {summary}",
            details={"skipped_hosts": self.skipped},
        )

    def _take(self, host: Host, listed: list[dict[str, Any]]) -> c.Claim | None:
        """Write the claim of ``host`` (atomic); None when another controller won it first.

        From the pool's list: no Lease -> create (409 AlreadyExists if someone was faster); a released Lease
        (empty holder) -> update carrying its resourceVersion (409 Conflict if it changed since the list).
        """
        known = c.claims_by_host(self.inputs.pool, [host], listed).get(host.name)
        previous = dict(known.raw) if known is not None else None
        body = c.lease_body(
            self.ns,
            self.inputs.pool,
            host,
            cluster=self.cluster,
            claimer=self.claimer,
            since=c.now_micro(),
            generation=c.FIRST_GENERATION,
            previous=previous,
        )
        self.before, self.after = c.diff_view(previous), c.diff_view(body)
        if self.check:  # nothing was claimed, so there is no "since" yet
            return dataclasses.replace(c.claim_from_lease(body), since=None)
        try:
            written = self.store.replace(body) if previous is not None else self.store.create(body)
        except Conflict:
            now = self.store.get(self.ns, body["metadata"]["name"])
            holder = c.claim_from_lease(now) if now else None
            if holder is not None and holder.cluster == self.cluster:
                return holder
            who = f"cluster {holder.cluster!r}" if holder and holder.cluster else "another controller"
            self.skipped.append({"name": host.name, "status": "claimed", "reason": f"{who} claimed it first"})
            return None
        return self._settle(c.claim_from_lease(written))

    def _settle(self, mine: c.Claim) -> c.Claim:
        """After a win: if this cluster now holds two hosts of the pool (a concurrent run for the same
        cluster claimed another), keep the first by Lease name and release the other."""
        held = sorted(
            (
                c.claim_from_lease(o)
                for o in self._list()
                if (o.get("spec") or {}).get("holderIdentity") == self.cluster
            ),
            key=lambda claim: claim.lease,
        )
        if len(held) <= 1 or held[0].lease == mine.lease:
            return mine
        self._delete(mine)
        self.module.warn(
            f"Another run claimed host {held[0].host!r} for cluster {self.cluster!r} at the same time;"
            f" this run released its own claim of {mine.host!r} and returns {held[0].host!r}."
        )
        return held[0]

    def _keep(self, plan: c.Plan) -> dict[str, Any]:
        """This cluster already holds a host: return it (the same host on every re-run)."""
        claim = plan.held[0]
        for extra in plan.held[1:]:  # left by two runs racing for one cluster, one of them killed
            if not self.check:
                self._delete(extra)
            self.module.warn(
                f"Cluster {self.cluster!r} also held host {extra.host!r}; released it (keeps {claim.host!r})."
            )
        host = self.inputs.host(claim.host) or next(
            h for h in self.inputs.hosts if c.lease_name(self.inputs.pool, h.name) == claim.lease
        )
        changed = len(plan.held) > 1
        if self.reinstall:
            claim = self._bump(claim, host)
            changed = True
        if self.bmc_hint:
            self._refresh_hint(host)
        return self._result(host, claim, changed=changed)

    def _bump(self, claim: c.Claim, host: Host) -> c.Claim:
        current = dict(claim.raw)
        for _attempt in range(WRITE_ATTEMPTS):
            now = c.claim_from_lease(current)
            if now.cluster != self.cluster:
                raise ConflictError(
                    f"host {host.name!r} changed hands to cluster {now.cluster!r} while bumping its generation"
                )
            body = c.lease_body(
                self.ns,
                self.inputs.pool,
                host,
                cluster=self.cluster,
                claimer=now.claimer or self.claimer,
                since=now.since or c.now_micro(),
                generation=now.generation + 1,
                previous=current,
            )
            self.before, self.after = c.diff_view(current), c.diff_view(body)
            if self.check:
                return c.claim_from_lease(body)
            try:
                return c.claim_from_lease(self.store.replace(body))
            except Conflict:
                fresh = self.store.get(self.ns, claim.lease)
                if fresh is None:
                    raise ConflictError(f"host {host.name!r} was released while bumping its generation") from None
                current = fresh
        raise ConflictError(f"the Lease of host {host.name!r} kept changing; bumping its generation gave up")

    # ---------------------------------------------------------------- hint
    def _write_hint(self, bmc: Bmc, wanted: str | None) -> None:
        try:
            action = hint_action(bmc.asset_tag(), wanted)
            if action in ("write", "clear"):
                bmc.set_asset_tag(wanted or "")
                action = "written" if action == "write" else "cleared"
            self.hint = {"status": action, "value": wanted or ""}
        except MetalplaneError as exc:
            self.hint = {"status": "failed", "error": exc.msg}
            self.module.warn(f"The claim holds, but the BMC's AssetTag hint was not written: {exc.msg}")

    def _refresh_hint(self, host: Host) -> None:
        if self.check:
            self.hint = {"status": "not checked in check mode"}
            return
        try:
            bmc = self.open_bmc(host)
        except MetalplaneError as exc:
            self.hint = {"status": "failed", "error": exc.msg}
            self.module.warn(
                f"The claim holds, but host {host.name!r}'s BMC did not answer to check its AssetTag hint: {exc.msg}"
            )
            return
        try:
            self._write_hint(bmc, hint_for(self.cluster))
        finally:
            bmc.close()

    # ---------------------------------------------------------------- absent
    def absent(self) -> dict[str, Any]:
        pool = self.inputs.pool
        leases = self._list()
        if self.only is not None:
            name = c.lease_name(pool, self.only)
            targets = [c.claim_from_lease(o) for o in leases if (o.get("metadata") or {}).get("name") == name]
            targets = [t for t in targets if t.held]
            for target in targets:
                if target.cluster != self.cluster and not self.force:
                    raise InputError(
                        "force",
                        f"host {self.only!r} of pool {pool!r} is claimed by cluster {target.cluster!r}, not"
                        f" {self.cluster!r}; set force: true to release it anyway",
                    )
        else:
            targets = [
                c.claim_from_lease(o) for o in leases if (o.get("spec") or {}).get("holderIdentity") == self.cluster
            ]
        released: list[dict[str, Any]] = []
        for target in sorted(targets, key=lambda t: t.lease):
            self.before = c.diff_view(target.raw)
            if not self.check:
                self._delete(target)
                host = self.inputs.host(target.host)
                if self.bmc_hint and host is not None:
                    self._clear_hint(host, target.cluster)
            released.append({"name": target.host, **target.public()})
        return {
            "changed": bool(released),
            "released": released,
            "bmc_hint": self.hint,
            "diff": {"before": self.before, "after": {}},
        }

    def _clear_hint(self, host: Host, cluster: str) -> None:
        try:
            bmc = self.open_bmc(host)
        except MetalplaneError as exc:
            self.hint = {"status": "failed", "error": exc.msg}
            self.module.warn(
                f"Released, but host {host.name!r}'s BMC did not answer to clear its AssetTag hint: {exc.msg}"
            )
            return
        try:
            current = bmc.asset_tag() or ""
            if current == hint_for(cluster):
                self._write_hint(bmc, None)
            else:
                self.hint = {"status": "unchanged" if not current.startswith(HINT_PREFIX) else "kept", "value": current}
        finally:
            bmc.close()

    def _delete(self, claim: c.Claim) -> None:
        """Delete a claim's Lease guarded by its uid and resourceVersion; re-read and retry on conflict."""
        current = claim
        for _attempt in range(WRITE_ATTEMPTS):
            try:
                self.store.delete(self.ns, current.lease, uid=current.uid, resource_version=current.resource_version)
                return
            except Conflict:
                fresh = self.store.get(self.ns, current.lease)
                if fresh is None:
                    return  # someone else released it: the outcome asked for
                now = c.claim_from_lease(fresh)
                if now.held and now.cluster != claim.cluster:
                    raise ConflictError(
                        f"host {claim.host!r} was claimed by cluster {now.cluster!r} while being released; left alone"
                    ) from None
                current = now
        raise ConflictError(f"the Lease of host {claim.host!r} kept changing; releasing it gave up")

    # ---------------------------------------------------------------- result
    def _result(self, host: Host, claim: c.Claim, *, changed: bool, inventory: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = {
            "changed": changed,
            "host": {
                **host.public(),
                "cluster": self.cluster,
                "generation": claim.generation,
                "since": claim.since,
                "claimer": claim.claimer,
                "lease": f"{self.ns}/{claim.lease}",
                "provisioning": dict(claim.record),
            },
            "skipped_hosts": self.skipped,
            "bmc_hint": self.hint,
        }
        if inventory is not None:
            result["host"]["inventory"] = inventory
        if changed:
            result["diff"] = {"before": self.before, "after": self.after}
        return result


def run_host_claim(
    module: Any, *, store_factory: StoreFactory | None = None, bmc_opener: BmcOpener | None = None
) -> dict[str, Any]:
    """``host_claim``: claim (``state=present``) or release (``absent``) a pool host for a cluster."""
    if bmc_opener is None:
        require_sushy(module)
    inputs = Inputs(module.params)  # validate before connecting anywhere
    _cluster(module.params)
    _check_host_option(module.params, inputs)
    with opened_store(module, store_factory) as store:
        run = ClaimRun(module, store, bmc_opener or open_redfish(inputs.api_timeout, inputs.refused_login_retries))
        result = run.present() if run.state == "present" else run.absent()
    if "diff" in result and not module.diff_mode:
        result.pop("diff")
    return result


# --------------------------------------------------------------------------------------------- host_pool_info
def pool_report(
    inputs: Inputs, leases: list[dict[str, Any]], open_bmc: BmcOpener, *, probe: bool = True
) -> dict[str, Any]:
    """Every host of the pool: ``claimed`` (by whom, since, generation), else ``mismatched`` (the inventory's
    facts or the BMC contradict the requirements), ``unreachable`` (the BMC error) or ``free``."""
    claims = c.claims_by_host(inputs.pool, inputs.hosts, leases)
    rows: list[dict[str, Any]] = []
    for host in inputs.hosts:
        row: dict[str, Any] = {**host.public()}
        claim = claims.get(host.name)
        if claim is not None and claim.held:
            rows.append({**row, "status": "claimed", "claim": claim.public()})
            continue
        reasons = fact_mismatches(inputs.requirements, host.facts)
        if reasons:
            rows.append({**row, "status": "mismatched", "reasons": reasons, "source": "facts"})
            continue
        if not probe:
            rows.append({**row, "status": "free"})
            continue
        status, detail, bmc = _probe(open_bmc, host, inputs.requirements)
        if bmc is not None:
            bmc.close()
            rows.append({**row, "status": "free", "inventory": detail})
        elif status == "unreachable":
            rows.append({**row, "status": "unreachable", "error": detail})
        else:
            rows.append(
                {
                    **row,
                    "status": "mismatched",
                    "reasons": detail["reasons"],
                    "source": "redfish",
                    "inventory": detail["inventory"],
                }
            )
    listed = {c.lease_name(inputs.pool, h.name) for h in inputs.hosts}
    orphans = [
        {"host": claim.host, **claim.public()}
        for claim in (c.claim_from_lease(o) for o in leases)
        if claim.lease not in listed and claim.held
    ]
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in ("free", "claimed", "unreachable", "mismatched")}
    return {"changed": False, "hosts": rows, "orphans": orphans, "counts": counts}


def run_host_pool_info(
    module: Any, *, store_factory: StoreFactory | None = None, bmc_opener: BmcOpener | None = None
) -> dict[str, Any]:
    """``host_pool_info``: read-only; one Lease list for the pool, one BMC check per free host."""
    if bmc_opener is None:
        require_sushy(module)
    inputs = Inputs(module.params)
    with opened_store(module, store_factory) as store:
        leases = store.list(inputs.namespace, c.pool_selector(inputs.pool))
        return pool_report(
            inputs,
            leases,
            bmc_opener or open_redfish(inputs.api_timeout, inputs.refused_login_retries),
            probe=module.params.get("check_bmcs", True) is not False,
        )
