# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``metal3_host``: register a pool's BareMetalHosts, claim one for a cluster, provision it; or release it.

Why the BareMetalHost is the claim (and no Lease is written): with Metal3 the host pool already lives on the
management cluster, and every Metal3 consumer (CAPM3 first) treats a non-empty ``spec.consumerRef`` as "in use".
Writing the claim there, with the ``resourceVersion`` that was read, makes it exclusive against those consumers
too: a Lease beside it would be a second truth CAPM3 never reads. A pool is a label selector over BareMetalHosts
(``metalplane.inference/pool=<pool>`` on the hosts this module registers, or the platform team's own labels with
``host_selector``), as CAPM3's ``hostSelector``; unlike CAPM3, which picks at random, the first free host by name
is taken, so a run is predictable.

Order of a ``present`` run: every input is checked and every pool host's registration planned before the first
write; then the missing BareMetalHosts (with their credentials Secrets) are registered, a host is claimed (waiting
for a just-registered host to become available), its config-drive Secrets are written, the image is set
(``online: true``), and the host is awaited through Metal3's states with a deadline per state. A failure names the
state, Metal3's error and, for the two Dell failures Ironic does not get out of alone, the Redfish recovery the role
runs before it waits again (``error.recovery``).

``absent``: CAPM3's deprovision patch, the wait for ``available`` and powered off (cleaning done), then the
release (``consumerRef`` and this collection's labels cleared, with the ``resourceVersion`` read), the config-drive
Secrets deleted, and with ``delete_host`` the BareMetalHost itself, only if this collection registered it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_timeout_seconds
from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ConflictError,
    InputError,
    MetalplaneError,
    NotFoundError,
)
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff
from ansible_collections.metalplane.inference.plugins.module_utils._kube import object_store
from ansible_collections.metalplane.inference.plugins.module_utils._kube.object_store import (
    Conflict,
    ObjectStore,
    StoreFactory,
)
from ansible_collections.metalplane.inference.plugins.module_utils._metal.claim_run import default_claimer
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import (
    Host,
    Requirements,
    fact_mismatches,
    parse_hosts,
    parse_requirements,
)

from . import bmh as b
from . import config_drive as cd
from . import progress as p

SECRET_API = "v1"
SECRET_KIND = "Secret"
# The host key of the install, kept beside the user data it is written into (Metal3 reads only ``userData``), so a
# re-run of the same generation writes the same Secret and the controller can pin the key before the first login.
HOST_KEY_KEY = "sshHostKey"
HOST_KEY_PUBLIC_KEY = "sshHostKeyPublic"
CLAIM_ATTEMPTS = 5  # re-plans after a 409: another consumer took the host between our read and our write
DEFAULT_NAMESPACE = "metal3"  # metal3-dev-env's and the Metal3 user guide's namespace for BareMetalHosts
DEFAULT_WAIT_TIMEOUT = 7200
POLL = Backoff(initial=2.0, cap=15.0)


class Metal3Failed(MetalplaneError):
    """The host did not reach the goal: Metal3's error or a state's deadline; ``recovery`` says what may cure it."""

    kind = "metal3"


@dataclass(frozen=True)
class Inputs:
    cluster: str
    namespace: str
    pool: str
    hosts: list[Host]
    requirements: Requirements
    selector: dict[str, str]
    boot_mode: str
    cleaning: str
    inspection_mode: str | None
    disable_cert_verification: bool
    claimer: str
    delete_host: bool
    wait: bool
    wait_timeout: int
    state_timeouts: dict[str, int]


@dataclass(frozen=True)
class NodeConfig:
    image: b.Image
    network: cd.StaticNetwork
    hostname: str
    user: str
    authorized_key: str


def _dns_label(field_name: str, value: Any) -> str:
    text = str(value or "").strip()
    if not text or len(text) > b.DNS_SUBDOMAIN_MAX or not b.DNS_SUBDOMAIN_RE.match(text):
        raise InputError(field_name, f"{value!r} must be a DNS name: lower-case letters, digits, '-' and '.'")
    return text


def parse_inputs(params: Mapping[str, Any]) -> Inputs:
    pool = str(params["pool"])
    selector = {str(k): str(v) for k, v in (params.get("host_selector") or {}).items()}
    state_timeouts = dict(p.DEFAULT_STATE_TIMEOUTS)
    for key, value in (params.get("state_timeouts") or {}).items():
        if key not in p.STATE_TIMEOUT_KEYS:
            raise InputError(
                f"state_timeouts.{key}", f"is not a Metal3 state; allowed: {', '.join(p.STATE_TIMEOUT_KEYS)}"
            )
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"state_timeouts.{key}", f"must be a whole number of seconds, 1 or more, got {value!r}")
        state_timeouts[key] = value
    wait_timeout = wait_timeout_seconds(params)
    hosts = parse_hosts(params.get("hosts"), pool)
    for index, host in enumerate(hosts):
        try:
            b.host_name(host.name)
        except InputError as exc:
            raise InputError(f"hosts[{index}].name", exc.msg.split(": ", 1)[-1]) from None
        try:
            b.bmc_address(host.bmc_url, host.personality, host.system_path)
        except InputError as exc:
            raise InputError(f"hosts[{index}].{exc.field}", exc.msg.split(": ", 1)[-1]) from None
    return Inputs(
        cluster=_dns_label("cluster", params["cluster"]),
        namespace=_dns_label("namespace", params.get("namespace") or DEFAULT_NAMESPACE),
        pool=pool,
        hosts=hosts,
        requirements=parse_requirements(params.get("requirements")),
        selector=selector or {b.POOL_LABEL: pool},
        boot_mode=str(params.get("boot_mode") or "UEFI"),
        cleaning=str(params.get("automated_cleaning_mode") or "metadata"),
        inspection_mode=params.get("inspection_mode"),
        disable_cert_verification=bool(params.get("disable_certificate_verification")),
        claimer=str(params.get("claimer") or default_claimer()),
        delete_host=bool(params.get("delete_host")),
        wait=bool(params.get("wait", True)),
        wait_timeout=wait_timeout,
        state_timeouts=state_timeouts,
    )


def parse_node_config(params: Mapping[str, Any], boot_mac: str | None = None) -> NodeConfig:
    """The provisioning inputs (``state=present`` only)."""
    image = b.parse_image(params.get("image"))
    network = params.get("network") or {}
    for key in ("node_ip", "gateway"):
        if not network.get(key):
            raise InputError(f"network.{key}", "is required: the node's static network (there is no DHCP)")
    dns = network.get("dns") or []
    if isinstance(dns, str):
        dns = [dns]
    net = cd.parse_network(boot_mac or "00:00:00:00:00:00", network["node_ip"], network["gateway"], dns)
    key = str(params.get("ssh_authorized_key") or "").strip()
    if not key.startswith(("ssh-", "ecdsa-", "sk-")):
        raise InputError("ssh_authorized_key", "must be one OpenSSH public key line (ssh-ed25519 AAAA...)")
    hostname = _dns_label("hostname", params.get("hostname") or params["cluster"])
    user = str(params.get("ssh_user") or "root")
    return NodeConfig(image=image, network=net, hostname=hostname, user=user, authorized_key=key)


def selector_text(selector: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict(obj.get("metadata") or {})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------------------------------ planning (pure)
@dataclass(frozen=True)
class RegistrationPlan:
    create: list[b.Registration]
    update: list[tuple[b.Registration, list[str]]]  # an owned host whose BMC fields drifted, and which


def registration_for(inputs: Inputs, host: Host) -> b.Registration:
    return b.Registration(
        name=b.host_name(host.name),
        namespace=inputs.namespace,
        pool=inputs.pool,
        address=b.bmc_address(host.bmc_url, host.personality, host.system_path),
        boot_mac=host.boot_mac,
        boot_mode=inputs.boot_mode,
        disable_certificate_verification=inputs.disable_cert_verification or not host.validate_certs,
        root_device_hints=b.root_device_hints(host.root_disk),
        # Inspection boots the deploy ramdisk before any cluster claims the host, so before any static network is
        # known for it: on a segment without DHCP it hangs. A host whose facts the pool already lists skips it.
        inspection_mode=inputs.inspection_mode or (b.INSPECTION_DISABLED if host.facts else None),
        labels=dict(inputs.selector),
    )


REGISTRATION_FIELDS = ("bmc", "bootMACAddress", "bootMode", "rootDeviceHints")


def plan_registration(inputs: Inputs, existing: Mapping[str, Mapping[str, Any]]) -> RegistrationPlan:
    """What to create and update; a host registered by someone else for another server is an error, not a write."""
    create: list[b.Registration] = []
    update: list[tuple[b.Registration, list[str]]] = []
    for index, host in enumerate(inputs.hosts):
        wanted = registration_for(inputs, host)
        found = existing.get(wanted.name)
        if found is None:
            create.append(wanted)
            continue
        spec = found.get("spec") or {}
        if not b.owned(found):
            mac = str(spec.get("bootMACAddress") or "").lower()
            if mac and mac != host.boot_mac:
                raise ConflictError(
                    f"hosts[{index}]: BareMetalHost {inputs.namespace}/{wanted.name} exists, was not registered by "
                    f"this collection and has boot MAC {mac}, not {host.boot_mac}: rename the pool host or fix its "
                    "boot_mac; nothing was written",
                    details={"field": f"hosts[{index}]", "host": wanted.name},
                )
            continue  # the platform team's host: used as it is, never rewritten
        desired = wanted.host()["spec"]
        drift = [key for key in REGISTRATION_FIELDS if key in desired and spec.get(key) != desired[key]]
        if drift:
            update.append((wanted, drift))
    return RegistrationPlan(create=create, update=update)


@dataclass(frozen=True)
class Candidate:
    name: str
    usable: bool
    reason: str | None
    on_its_way: bool  # not free yet, but heading for available without an error (registering, inspecting)


ON_THE_WAY = (b.STATE_NONE, b.STATE_REGISTERING, b.STATE_INSPECTING, b.STATE_PREPARING, b.STATE_MATCH_PROFILE)


MEBIBYTES_PER_GIB = 1024


def inspection_mismatches(requirements: Requirements, host: Mapping[str, Any]) -> list[str]:
    """Requirements Metal3's inspection rules out. Its ``hardwareDetails`` report the memory but no GPUs (BMO's
    HardwareDetails has no PCI devices), so the GPU requirements rest on the pool's facts alone."""
    details = (host.get("status") or {}).get("hardwareDetails") or {}
    ram = details.get("ramMebibytes")
    wanted = requirements.min_memory_gib
    if not wanted or not isinstance(ram, int) or isinstance(ram, bool) or ram <= 0:
        return []
    found = ram / MEBIBYTES_PER_GIB
    if found >= wanted:
        return []
    return [f"min_memory_gib: Metal3's inspection found {found:g} GiB, the cluster needs at least {wanted}"]


def assess(host: Mapping[str, Any], inputs: Inputs, facts: Mapping[str, Mapping[str, Any]]) -> Candidate:
    """Whether a BareMetalHost of the pool may be claimed (CAPM3's chooseHost rules, plus the requirements)."""
    meta = _meta(host)
    name = str(meta.get("name"))
    annotations = meta.get("annotations") or {}
    status = b.status_of(host)
    ref = b.consumer_of(host)
    reason = None
    if ref:
        reason = f"held by {ref.get('kind')} {ref.get('namespace', '')}/{ref.get('name')}".replace(" /", " ")
    elif meta.get("deletionTimestamp"):
        reason = "being deleted"
    elif b.PAUSED_ANNOTATION in annotations or b.DETACHED_ANNOTATION in annotations:
        reason = "paused or detached (annotation)"
    elif status["error_message"]:
        reason = f"in error: {status['error_type']}: {status['error_message']}"
    elif status["state"] not in b.FREE_STATES:
        reason = f"in state {status['state'] or '(none yet)'!r}, not available"
    else:
        mismatches = fact_mismatches(inputs.requirements, facts.get(name) or {})
        mismatches += inspection_mismatches(inputs.requirements, host)
        if mismatches:
            reason = "does not meet the requirements: " + "; ".join(mismatches)
    on_its_way = reason is not None and not ref and not status["error_message"] and status["state"] in ON_THE_WAY
    return Candidate(name=name, usable=reason is None, reason=reason, on_its_way=on_its_way)


def choose(
    hosts: list[Mapping[str, Any]], inputs: Inputs, facts: Mapping[str, Mapping[str, Any]]
) -> tuple[Mapping[str, Any] | None, list[Candidate]]:
    """The host this cluster holds, else the first usable one by name; and every host's assessment."""
    ordered = sorted(hosts, key=lambda h: str(_meta(h).get("name")))
    for host in ordered:
        if b.held_by(host, inputs.cluster):
            return host, []
    assessed = [(host, assess(host, inputs, facts)) for host in ordered]
    for host, verdict in assessed:
        if verdict.usable:
            return host, [v for _h, v in assessed]
    return None, [v for _h, v in assessed]


def _skip_status(candidate: Candidate) -> str:
    """``host_claim``'s skip statuses for a BareMetalHost: claimed, mismatched or unavailable (any Metal3 reason)."""
    if (candidate.reason or "").startswith("held by"):
        return "claimed"
    if (candidate.reason or "").startswith("does not meet"):
        return "mismatched"
    return "unavailable"


def claimed_copy(host: Mapping[str, Any], inputs: Inputs, generation: int) -> dict[str, Any]:
    """The host with this cluster's consumerRef, labels and annotations (a replace body: keeps resourceVersion)."""
    body = {k: v for k, v in host.items() if k != "status"}
    meta = _meta(body)
    meta["labels"] = {**(meta.get("labels") or {}), b.CLUSTER_LABEL: inputs.cluster}
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        b.CLAIMER_ANNOTATION: inputs.claimer,
        b.CLAIMED_AT_ANNOTATION: _now(),
        b.GENERATION_ANNOTATION: str(generation),
    }
    body["metadata"] = meta
    body["spec"] = {**(body.get("spec") or {}), "consumerRef": b.consumer_ref(inputs.cluster, inputs.namespace)}
    return body


def released_copy(host: Mapping[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in host.items() if k != "status"}
    meta = _meta(body)
    meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items() if k != b.CLUSTER_LABEL}
    ours = (b.CLAIMER_ANNOTATION, b.CLAIMED_AT_ANNOTATION, b.GENERATION_ANNOTATION)
    meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in ours}
    body["metadata"] = meta
    body["spec"] = {k: v for k, v in (body.get("spec") or {}).items() if k != "consumerRef"}
    return body


def generation_of(host: Mapping[str, Any]) -> int:
    try:
        return int((_meta(host).get("annotations") or {}).get(b.GENERATION_ANNOTATION) or 1)
    except ValueError:
        return 1


# --------------------------------------------------------------------------------------------------- the run
class Metal3Run:
    """One module run over an ``ObjectStore``; ``clock``/``sleep`` are injectable so waits run in no time in tests."""

    def __init__(
        self,
        module: Any,
        store: ObjectStore,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.module = module
        self.store = store
        self.clock = clock
        self.sleep = sleep
        self.params = module.params
        self.inputs = parse_inputs(self.params)
        self.changed = False
        self.events: list[str] = []
        self.would_register: list[dict[str, Any]] = []  # check mode: the hosts a real run would register first

    # ---------------------------------------------------------------- reads
    def pool_hosts(self) -> list[dict[str, Any]]:
        return self.store.list(b.API_VERSION, b.KIND, self.inputs.namespace, selector_text(self.inputs.selector))

    def get_host(self, name: str) -> dict[str, Any] | None:
        return self.store.get(b.API_VERSION, b.KIND, self.inputs.namespace, name)

    def facts(self) -> dict[str, Mapping[str, Any]]:
        return {b.host_name(h.name): h.facts for h in self.inputs.hosts}

    # ---------------------------------------------------------------- writes
    def _secret(self, name: str, data: Mapping[str, str], owner: Mapping[str, Any] | None) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": name,
            "namespace": self.inputs.namespace,
            "labels": {b.MANAGED_BY_LABEL: b.MANAGED_BY, b.POOL_LABEL: self.inputs.pool},
        }
        if owner is not None and _meta(owner).get("uid"):
            meta["ownerReferences"] = [
                {
                    "apiVersion": b.API_VERSION,
                    "kind": b.KIND,
                    "name": _meta(owner)["name"],
                    "uid": _meta(owner)["uid"],
                }
            ]
        return {
            "apiVersion": SECRET_API,
            "kind": SECRET_KIND,
            "type": "Opaque",
            "metadata": meta,
            "stringData": dict(data),
        }

    def ensure_secret(self, name: str, data: Mapping[str, str], owner: Mapping[str, Any] | None = None) -> bool:
        """Create or update Secret ``name`` to hold exactly ``data``; True when it changed (values never shown)."""
        import base64

        found = self.store.get(SECRET_API, SECRET_KIND, self.inputs.namespace, name)
        wanted = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        body = self._secret(name, data, owner)
        owners = body["metadata"].get("ownerReferences")
        same_owner = not owners or _meta(found or {}).get("ownerReferences") == owners
        if found is not None and (found.get("data") or {}) == wanted and same_owner:
            return False
        if self.module.check_mode:
            return True
        if found is None:
            self.store.create(body)
        else:
            body["metadata"]["resourceVersion"] = _meta(found).get("resourceVersion")
            self.store.replace(body)
        return True

    def read_secret(self, name: str) -> dict[str, str]:
        import base64

        found = self.store.get(SECRET_API, SECRET_KIND, self.inputs.namespace, name) or {}
        return {k: base64.b64decode(v).decode() for k, v in (found.get("data") or {}).items()}

    def delete_secret(self, name: str) -> bool:
        if self.store.get(SECRET_API, SECRET_KIND, self.inputs.namespace, name) is None:
            return False
        if not self.module.check_mode:
            self.store.delete(SECRET_API, SECRET_KIND, self.inputs.namespace, name)
        return True

    # ---------------------------------------------------------------- steps
    def register(self) -> list[str]:
        """Register the pool hosts that have no BareMetalHost yet; fix the BMC fields and credentials of ours."""
        existing = {str(_meta(h).get("name")): h for h in self._named_hosts()}
        plan = plan_registration(self.inputs, existing)
        by_name = {b.host_name(h.name): h for h in self.inputs.hosts}
        touched: set[str] = set()
        for registration in plan.create:
            touched.add(registration.name)
            if self.module.check_mode:
                self.would_register.append(registration.host())
                continue
            credentials = by_name[registration.name].credentials()
            # The Secret first (a BareMetalHost without it goes to a registration error at once), then the host,
            # then the Secret owned by the host, so that deleting the host deletes its credentials.
            self.ensure_secret(registration.credentials_name, credentials)
            created = self.store.create(registration.host())
            self.ensure_secret(registration.credentials_name, credentials, owner=created)
        for registration, drift in plan.update:
            touched.add(registration.name)
            if not self.module.check_mode:
                desired = registration.host()["spec"]
                patch = {"spec": {key: desired[key] for key in drift}}
                self.store.patch(b.API_VERSION, b.KIND, self.inputs.namespace, registration.name, patch)
        for name, host in existing.items():
            if b.owned(host) and self.ensure_secret(
                name + b.CREDENTIALS_SUFFIX, by_name[name].credentials(), owner=host
            ):
                touched.add(name)  # the BMC password was rotated in the vault
        if touched:
            self.changed = True
            self.events.append(f"registered or updated: {', '.join(sorted(touched))}")
        return sorted(touched)

    def _named_hosts(self) -> list[dict[str, Any]]:
        found = []
        for host in self.inputs.hosts:
            obj = self.get_host(b.host_name(host.name))
            if obj is not None:
                found.append(obj)
        return found

    def claim(self, only: str | None = None) -> tuple[dict[str, Any], list[Candidate]]:
        """The host this cluster holds, or a newly claimed one (waiting for a just-registered host if need be).

        ``only``: a new claim may take only the BareMetalHost of that name (``host_claim``'s ``host``).
        """
        limit = self.inputs.wait_timeout if self.inputs.wait else 0
        end = self.clock() + limit
        delays = POLL.delays()
        attempts = 0
        while True:
            hosts = self.pool_hosts()
            registered = {str(_meta(h).get("name")) for h in hosts}
            hosts += [h for h in self.would_register if str(_meta(h).get("name")) not in registered]
            if only is not None:
                hosts = [h for h in hosts if b.held_by(h, self.inputs.cluster) or str(_meta(h).get("name")) == only]
            chosen, assessed = choose(hosts, self.inputs, self.facts())
            if chosen is not None and b.held_by(chosen, self.inputs.cluster):
                return dict(chosen), []
            if chosen is not None:
                if self.module.check_mode:
                    self.changed = True
                    return dict(chosen), assessed
                try:
                    claimed = self.store.replace(claimed_copy(chosen, self.inputs, 1))
                except Conflict:
                    attempts += 1
                    if attempts >= CLAIM_ATTEMPTS:
                        raise
                    continue
                self.changed = True
                self.events.append(f"claimed {_meta(claimed).get('name')}")
                return claimed, assessed
            waiting = [c for c in assessed if c.on_its_way]
            if self.module.check_mode and self.would_register:
                # A real run would register these and claim the first once available: report that one.
                self.changed = True
                return min(self.would_register, key=lambda h: str(_meta(h).get("name"))), assessed
            if not waiting or self.clock() >= end or self.module.check_mode:
                reasons = "; ".join(f"{c.name}: {c.reason}" for c in assessed) or "no BareMetalHost matches"
                raise NotFoundError(
                    f"No free BareMetalHost in pool {self.inputs.pool!r} (namespace {self.inputs.namespace}, "
                    f"selector {selector_text(self.inputs.selector)}): {reasons}",
                    details={"hosts": [c.__dict__ for c in assessed]},
                )
            self.sleep(min(next(delays), max(0.0, end - self.clock())))

    def config_drive(self, host: Mapping[str, Any], node: NodeConfig) -> b.Provisioning:
        """Write the user-data and network-data Secrets of this claim's generation; the spec that points at them."""
        from ansible_collections.metalplane.inference.plugins.module_utils._metal.hostkeys import (
            generate_host_key,
            parse_host_key,
        )

        name = str(_meta(host)["name"])
        generation = generation_of(host)
        user_secret = name + b.USER_DATA_SUFFIX
        network_secret = name + b.NETWORK_DATA_SUFFIX
        kept = self.read_secret(user_secret)
        comment = f"root@{node.hostname}"
        if kept.get(HOST_KEY_KEY) and kept.get(b.GENERATION_ANNOTATION) == str(generation):
            key = parse_host_key(kept[HOST_KEY_KEY], comment)
        else:
            key = generate_host_key(comment)
        self.host_key_public = key.public
        self.module.log_secret(key.private)
        mac = str((host.get("spec") or {}).get("bootMACAddress") or "").lower()
        net = cd.StaticNetwork(
            mac=mac, address=node.network.address, gateway=node.network.gateway, dns=node.network.dns
        )
        user_data = cd.user_data(
            hostname=node.hostname,
            user=node.user,
            authorized_key=node.authorized_key,
            host_key_private=key.private,
            host_key_public=key.public,
            cluster=self.inputs.cluster,
            generation=generation,
        )
        changed = self.ensure_secret(
            user_secret,
            {
                b.USER_DATA_KEY: user_data,
                HOST_KEY_KEY: key.private,
                HOST_KEY_PUBLIC_KEY: key.public,
                b.GENERATION_ANNOTATION: str(generation),
            },
            owner=host,
        )
        changed = self.ensure_secret(network_secret, {b.NETWORK_DATA_KEY: cd.network_data(net)}, owner=host) or changed
        if changed:
            self.changed = True
            self.events.append("config drive written")
        return b.Provisioning(
            image=node.image,
            user_data=user_secret,
            network_data=network_secret,
            preprovisioning_network_data=network_secret,
            automated_cleaning_mode=self.inputs.cleaning,
        )

    def provision(self, host: Mapping[str, Any], wanted: b.Provisioning) -> dict[str, Any]:
        name = str(_meta(host)["name"])
        status = b.status_of(host)
        current_image = ((host.get("spec") or {}).get("image") or {}).get("url")
        if status["state"] == b.STATE_PROVISIONED and current_image and current_image != wanted.image.url:
            raise ConflictError(
                f"BareMetalHost {self.inputs.namespace}/{name} is provisioned with {current_image}, not "
                f"{wanted.image.url}: Metal3 does not reprovision on an image change; run the teardown "
                "(state absent) first, then present",
                details={"host": name, "image": current_image},
            )
        drift = b.provisioning_drift(host, wanted, self.inputs.namespace)
        if not drift:
            return dict(host)
        self.changed = True
        self.events.append(f"provisioning fields set: {', '.join(drift)}")
        if self.module.check_mode:
            return dict(host)
        return self.store.patch(b.API_VERSION, b.KIND, self.inputs.namespace, name, wanted.patch(self.inputs.namespace))

    def wait(self, name: str, goal: str) -> dict[str, Any]:
        """Poll the host until ``goal``; Metal3Failed with Metal3's words and a recovery hint otherwise."""
        state_clock = p.StateClock(clock=self.clock, timeouts=self.inputs.state_timeouts)
        end = self.clock() + self.inputs.wait_timeout
        delays = POLL.delays()
        # After a recovery, the errors the host already shows asked for it: only new ones count (the lowest count
        # seen, as BMO resets it to 0 when a step completes).
        errors_before: int | None = None
        while True:
            host = self.get_host(name)
            if host is None:
                raise NotFoundError(
                    f"BareMetalHost {self.inputs.namespace}/{name} was deleted while waiting for {goal}"
                )
            if self.params.get("after_recovery"):
                count = int(b.status_of(host).get("error_count") or 0)
                errors_before = count if errors_before is None else min(errors_before, count)
            verdict = p.judge(goal, host, state_clock, errors_before=errors_before or 0)
            if verdict.done:
                return host
            if verdict.failed or self.clock() >= end:
                reason = verdict.reason or (
                    f"not {goal} after {self.inputs.wait_timeout} s: {p.describe(verdict.status)}"
                )
                raise Metal3Failed(
                    f"BareMetalHost {self.inputs.namespace}/{name}: {reason}",
                    details={
                        "host": name,
                        "goal": goal,
                        "status": dict(verdict.status),
                        "recovery": verdict.recovery or p.recovery_for(verdict.status, stuck=True),
                        "states": [s for s, _t in state_clock.history],
                    },
                )
            self.sleep(min(next(delays), max(0.0, end - self.clock())))

    # ---------------------------------------------------------------- the two states
    def present(self) -> dict[str, Any]:
        node = parse_node_config(self.params)
        registered = self.register()
        host, assessed = self.claim()
        name = str(_meta(host)["name"])
        wanted = self.config_drive(host, node)
        host = self.provision(host, wanted)
        if self.inputs.wait and not self.module.check_mode:
            host = self.wait(name, p.GOAL_PROVISIONED)
        return self.result(host, node, registered=registered, skipped=[c.__dict__ for c in assessed if not c.usable])

    def absent(self) -> dict[str, Any]:
        held = [h for h in self.pool_hosts() if b.held_by(h, self.inputs.cluster)]
        released = [name for name in (self.release(host) for host in held) if name]
        if not held:
            return {"changed": False, "released": [], "msg": f"cluster {self.inputs.cluster} holds no BareMetalHost"}
        return {"changed": self.changed, "released": released, "events": self.events}

    def release(self, host: Mapping[str, Any]) -> str | None:
        """Deprovision, wait until clean and off, release, drop the config drive (and the host with delete_host)."""
        name = str(_meta(host)["name"])
        spec = host.get("spec") or {}
        if any(spec.get(key) for key in ("image", "online", "userData", "networkData")):
            self.changed = True
            self.events.append(f"deprovisioning {name}")
            if not self.module.check_mode:
                self.store.patch(b.API_VERSION, b.KIND, self.inputs.namespace, name, b.DEPROVISION_PATCH)
        if self.module.check_mode:
            return name
        if self.inputs.wait:
            host = self.wait(name, p.GOAL_RELEASED)
        elif not p.reached(p.GOAL_RELEASED, b.status_of(host)):
            return None  # still deprovisioning: the claim stays until a run that waits sees the host clean and off
        self._clear_claim(name, host)
        self.delete_secret(name + b.USER_DATA_SUFFIX)
        self.delete_secret(name + b.NETWORK_DATA_SUFFIX)
        if self.inputs.delete_host:
            if b.owned(host):
                self.store.delete(b.API_VERSION, b.KIND, self.inputs.namespace, name)
                self.events.append(f"deleted {name}")
            else:
                self.module.warn(
                    f"BareMetalHost {self.inputs.namespace}/{name} was not registered by this collection; "
                    "delete_host leaves it in place"
                )
        self.changed = True
        self.events.append(f"released {name}")
        return name

    def _clear_claim(self, name: str, host: Mapping[str, Any], holder: str | None = None) -> None:
        """Clear the claim of ``holder`` (this cluster unless forced), re-reading after a 409."""
        holder = holder or self.inputs.cluster
        current: Mapping[str, Any] | None = host
        for _attempt in range(CLAIM_ATTEMPTS):
            if current is None or not b.held_by(current, holder):
                return
            try:
                self.store.replace(released_copy(current))
                return
            except Conflict:
                current = self.get_host(name)
        raise ConflictError(f"BareMetalHost {self.inputs.namespace}/{name} kept changing; its claim was not cleared")

    # ---------------------------------------------------------------- host_claim's metal3 backend
    def claim_only(self, only: str | None) -> dict[str, Any]:
        """``host_claim`` with ``backend: metal3``: set the consumerRef of an available BareMetalHost; nothing else.

        The pool's hosts must already be registered (by ``metal3_host`` or by the platform team), so this takes no
        BMC credentials of its own and never waits: a host still registering or inspecting is reported, not taken.
        """
        before = next((h for h in self.pool_hosts() if b.held_by(h, self.inputs.cluster)), None)
        host, assessed = self.claim(only)
        name = str(_meta(host).get("name"))
        pool_host = next((h for h in self.inputs.hosts if b.host_name(h.name) == name), None)
        annotations = _meta(host).get("annotations") or {}
        spec = host.get("spec") or {}
        result: dict[str, Any] = {
            "changed": self.changed,
            "host": {
                "name": pool_host.name if pool_host else name,
                "bmc_url": pool_host.bmc_url if pool_host else None,
                "boot_mac": spec.get("bootMACAddress") or (pool_host.boot_mac if pool_host else None),
                "personality": pool_host.personality if pool_host else None,
                "facts": dict(pool_host.facts) if pool_host else {},
                "cluster": self.inputs.cluster,
                "generation": generation_of(host),
                "since": annotations.get(b.CLAIMED_AT_ANNOTATION),
                "claimer": annotations.get(b.CLAIMER_ANNOTATION, self.inputs.claimer),
                "lease": None,
                "bare_metal_host": f"{self.inputs.namespace}/{name}",
                "root_disk": dict(pool_host.root_disk) if pool_host and pool_host.root_disk else {},
                "provisioning": {},
            },
            "skipped_hosts": [
                {"name": c.name, "status": _skip_status(c), "reason": c.reason} for c in assessed if not c.usable
            ],
            "bmc_hint": {"status": "disabled", "reason": "the BareMetalHost's consumerRef is the visible claim"},
        }
        if getattr(self.module, "diff_mode", False):
            result["diff"] = {
                "before": {"consumerRef": b.consumer_of(before) if before else None},
                "after": {"consumerRef": b.consumer_ref(self.inputs.cluster, self.inputs.namespace)},
            }
        return result

    def release_only(self, only: str | None, force: bool) -> dict[str, Any]:
        """``host_claim`` ``state: absent`` with ``backend: metal3``: clear the consumerRef of a host with no image.

        A host still provisioned is refused rather than released: clearing the claim of a host that runs a node
        would hand a live server to the next consumer, so deprovisioning (``metal3_host state=absent``) comes first.
        """
        if only is not None:
            found = self.get_host(b.host_name(only))
            targets = [found] if found is not None and b.consumer_of(found) else []
        else:
            targets = [h for h in self.pool_hosts() if b.held_by(h, self.inputs.cluster)]
        released = []
        for host in targets:
            name = str(_meta(host)["name"])
            ref = b.consumer_of(host) or {}
            holder = str(ref.get("name") or "")
            if ref.get("kind") != b.CONSUMER_KIND:  # CAPM3's Metal3Machine, another tool: theirs to release
                raise ConflictError(
                    f"BareMetalHost {self.inputs.namespace}/{name} is held by {ref.get('kind')} {holder!r}, not by a "
                    "cluster of this collection; release it with the tool that claimed it (force does not apply)",
                    details={"host": name},
                )
            if not b.held_by(host, self.inputs.cluster) and not force:
                raise InputError(
                    "force",
                    f"BareMetalHost {self.inputs.namespace}/{name} is claimed by {holder!r}, not "
                    f"{self.inputs.cluster!r}; set force: true to release it anyway",
                )
            spec = host.get("spec") or {}
            if any(spec.get(key) for key in ("image", "userData", "networkData")):
                raise ConflictError(
                    f"BareMetalHost {self.inputs.namespace}/{name} is still provisioned (spec.image or its config "
                    "drive is set): deprovision it first with metalplane.inference.metal3_host state=absent (the "
                    "baremetal_host role does); the claim was kept",
                    details={"host": name},
                )
            if not self.module.check_mode:
                self._clear_claim(name, host, holder)
            self.changed = True
            released.append({"name": name, "cluster": holder, "bare_metal_host": f"{self.inputs.namespace}/{name}"})
        return {"changed": self.changed, "released": released, "bmc_hint": {"status": "disabled"}}

    def info(self) -> dict[str, Any]:
        """The host the cluster holds (or None), with the public half of its install's SSH host key."""
        held = sorted(
            (h for h in self.pool_hosts() if b.held_by(h, self.inputs.cluster)), key=lambda h: str(_meta(h)["name"])
        )
        if not held:
            return {"changed": False, "host": None}
        host = held[0]
        name = str(_meta(host)["name"])
        kept = self.read_secret(name + b.USER_DATA_SUFFIX)
        spec = host.get("spec") or {}
        generation = generation_of(host)
        return {
            "changed": False,
            "host": {
                "name": name,
                "namespace": self.inputs.namespace,
                "cluster": self.inputs.cluster,
                "generation": generation,
                "boot_mac": spec.get("bootMACAddress"),
                "bmc_address": (spec.get("bmc") or {}).get("address"),
                "owned": b.owned(host),
                "image": (spec.get("image") or {}).get("url"),
                "ssh_host_public_key": kept.get(HOST_KEY_PUBLIC_KEY)
                if kept.get(b.GENERATION_ANNOTATION) == str(generation)
                else None,
                "status": b.status_of(host),
            },
        }

    def result(
        self, host: Mapping[str, Any], node: NodeConfig, *, registered: list[str], skipped: list[dict[str, Any]]
    ) -> dict[str, Any]:
        meta = _meta(host)
        spec = host.get("spec") or {}
        status = b.status_of(host)
        return {
            "changed": self.changed,
            "host": {
                "name": meta.get("name"),
                "namespace": self.inputs.namespace,
                "cluster": self.inputs.cluster,
                "generation": generation_of(host),
                "boot_mac": spec.get("bootMACAddress"),
                "bmc_address": (spec.get("bmc") or {}).get("address"),
                "owned": b.owned(host),
                "address": str(node.network.address.ip),
                "hostname": node.hostname,
                "ssh_host_public_key": getattr(self, "host_key_public", None),
                "status": status,
            },
            "registered": registered,
            "skipped_hosts": skipped,
            "events": self.events,
            # The Redfish cure the role ran before this call, as the timeline's recovery event (``recovered_by``).
            "recovered_by": self.params.get("after_recovery") or "none",
        }


def opened_store(module: Any, store_factory: StoreFactory | None) -> AbstractContextManager[Any]:
    """The BareMetalHosts' management cluster (``object_store.connect`` unless a test passes its own factory)."""
    return object_store.opened_store(module, store_factory, object_store.connect)


def run_metal3_host_info(
    module: Any,
    *,
    store_factory: StoreFactory | None = None,
) -> dict[str, Any]:
    parse_inputs(module.params)
    with opened_store(module, store_factory) as store:
        return Metal3Run(module, store).info()


def run_metal3_claim(module: Any, *, store_factory: StoreFactory | None = None) -> dict[str, Any]:
    """``host_claim`` with ``backend: metal3`` (the BareMetalHost's consumerRef is the claim)."""
    params = module.params
    if params.get("reinstall"):
        raise InputError(
            "reinstall",
            "is not offered with backend: metal3; release the host (metal3_host state=absent) and claim it again",
        )
    inputs = parse_inputs(params)  # every input checked before the first call
    only = params.get("host") or None
    if only and (params.get("state") or "present") == "present":
        only = b.host_name(only)
    with opened_store(module, store_factory) as store:
        run = Metal3Run(module, store)
        run.inputs = dataclasses.replace(inputs, wait=False)  # a claim takes what is available now, never waits
        if (params.get("state") or "present") == "present":
            return run.claim_only(only)
        return run.release_only(params.get("host") or None, bool(params.get("force")))


def run_metal3_host(
    module: Any,
    *,
    store_factory: StoreFactory | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    params = module.params
    parse_inputs(params)  # every input checked before the first call
    if params.get("state", "present") == "present":
        parse_node_config(params)
    with opened_store(module, store_factory) as store:
        run = Metal3Run(module, store, clock=clock, sleep=sleep)
        return run.present() if params.get("state", "present") == "present" else run.absent()
