"""A simulated Metal3 (baremetal-operator + Ironic) that drives BareMetalHosts through the lab's BMCs and hosts.

Why: ``provisioner: metal3`` writes ``metal3.io/v1alpha1`` BareMetalHosts and Secrets and then waits on
Metal3's state machine. A test of that needs the state machine to be driven by something that behaves like
Metal3 where the module can tell: the states and fields BMO reports (names checked against upstream's Go
constants, ``lab.metal3.contract``), the Secrets and keys it reads, the errors it reports and retries, and what
it does to the BMC and the server (power, virtual media, one-time boot, the image on the disk). Here one worker
thread per BareMetalHost plays BMO and Ironic: it talks Redfish to the lab BMC named by ``spec.bmc.address``
(``lab.metal3.redfish``), and plays the Ironic Python Agent on the simulated host behind it
(``lab.metal.host.MetalHost``: it boots this controller's deploy ramdisk ISO from the virtual CD, and the
"agent" writes the image with ``image_written`` or cleans the disk with ``metadata_cleaned``).

Usage (in-process)::

    with ModelplaneEmulator(extra_crds=(bmh_crd(),)) as mp, RedfishLab(...) as bmcs, MetalFleet(...) as fleet:
        with Metal3Controller(mp.api, fleet, ca_path=bmcs.ca_path, delay_scale=0.0) as metal3:
            mp.api.create(secret); mp.api.create(bare_metal_host)
            metal3.wait_for(namespace, name, lambda bmh: state(bmh) == "available", timeout=60)

States (``status.provisioning.state``): "" -> registering -> inspecting (skipped with ``inspectionMode:
disabled``) -> available -> provisioning (``spec.image.url`` set) -> provisioned -> deprovisioning (image
cleared or changed) -> available; deletion: powering off before delete -> deleting -> finalizer removed. An
error keeps the state, sets ``operationalStatus: error``, ``errorType``, ``errorMessage``, increments
``errorCount`` and retries after a backoff (BMO: exponential, scaled here); the next completed action clears it.
What is and is not modelled: docs/testing/metal3-lab.md.
"""

from __future__ import annotations

import base64
import functools
import json
import shutil
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from lab.common.artifacts import ISO9660_MAGIC_OFFSET, SECTOR
from lab.common.emulator import LOOPBACK, free_port
from lab.kube.api import ApiError
from lab.kube.server import KubeEmulator
from lab.metal.host import AGENT_RUNNING, AGENT_VOLUME_ID, ISO_VOLUME_ID, MetalHost
from lab.metal.identity import DiskIdentity, network_problem
from lab.metal3 import contract as c
from lab.metal3.configdrive import ConfigDriveError, install_config, networks_from
from lab.metal3.redfish import RedfishClient, RedfishFailure

Obj = dict[str, Any]

TICK = 0.1  # seconds between looks at the BareMetalHost list (new hosts get a worker within one tick)
# Real seconds between a stable host's power checks (available, provisioned: spec.online against the BMC's power).
# A change to the host (spec, annotations, finalizers, deletion) wakes its worker at once, as a watch wakes BMO.
STABLE_POLL = 1.0
# Seconds (times delay_scale) the simulated BMO/Ironic spends in a state's own work: registration's driver
# validation, inspection's hardware collection, writing the image.
REGISTER_SECONDS = 2.0
INSPECT_SECONDS = 20.0
WRITE_IMAGE_SECONDS = 30.0
# Ironic's [conductor]deploy_callback_timeout (1800 s): how long it waits for the deploy ramdisk's agent to call
# back. Scaled; a ramdisk without an address never calls back, so this is how long such a host "hangs".
AGENT_CALLBACK_TIMEOUT = 1800.0
# Real seconds (whatever the scale) a booting host may take to start the ramdisk before the boot itself is
# reported as failed: only bounds a failure (the lab boots at once at delay scale 0).
AGENT_BOOT_FLOOR = 30.0
AGENT_BOOT_SECONDS = 120.0  # the same bound in lab time, scaled
# BMO's error backoff: 2^errorCount seconds, capped (controllers/metal3.io: calculateBackoff), scaled, with a real
# floor so a failing host does not spin.
BACKOFF_CAP = 600.0
BACKOFF_FLOOR = 0.2
# The deploy ramdisk (Ironic Python Agent's ISO) this controller serves and inserts as virtual media.
DEPLOY_ISO = "ironic-python-agent.iso"
# The lab disk's properties a root device hint may name beyond its identity (lab.metal.identity.DiskIdentity).
DISK_VENDOR = "SEAGATE"
DISK_SIZE_GB = 1200
DISK_HCTL = "0:2:0:0"
CPU_ARCH = "x86_64"


class StepFailed(Exception):
    """An operation failed; BMO records ``error_type`` and ``message`` and retries."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def initial_status() -> Obj:
    """The status fields the CRD requires (``errorCount`` .. ``provisioningFailCount``), empty."""
    return {
        "operationalStatus": "",
        "errorMessage": "",
        "errorCount": 0,
        "poweredOn": False,
        "provisioning": {"ID": "", "state": c.STATE_NONE},
        "provisioningFailCount": 0,
    }


def backoff(error_count: int, delay_scale: float) -> float:
    return max(min(2.0**error_count, BACKOFF_CAP) * delay_scale, BACKOFF_FLOOR)


def root_device_problem(hints: Obj | None, disk: DiskIdentity) -> str | None:
    """Ironic's root device hint matching against the lab host's one disk: None when it matches."""
    if not hints:
        return None
    actual: Obj = {
        "deviceName": disk.names(),
        "serialNumber": {disk.serial},
        "wwn": {disk.wwn},
        "wwnWithExtension": {disk.wwn},
        "hctl": {DISK_HCTL},
    }
    substrings = {"model": disk.model, "vendor": DISK_VENDOR}
    for key, wanted in hints.items():
        if key in actual:
            ok = str(wanted) in actual[key]
        elif key in substrings:
            ok = str(wanted).lower() in substrings[key].lower()
        elif key == "minSizeGigabytes":
            ok = int(wanted) <= DISK_SIZE_GB
        elif key == "rotational":
            ok = bool(wanted) is True
        else:  # wwnVendorExtension: the lab disk has none
            ok = False
        if not ok:
            return f"No suitable device was found for deployment using these hints {json.dumps(hints, sort_keys=True)}"
    return None


def _secret_value(secret: Obj | None, key: str) -> str | None:
    data = (secret or {}).get("data") or {}
    if key in data:
        return base64.b64decode(data[key]).decode()
    string = (secret or {}).get("stringData") or {}
    return str(string[key]) if key in string else None


@functools.cache
def deploy_iso_bytes() -> bytes:
    """A minimal ISO 9660 image whose volume identifier marks it as the agent's ramdisk (lab.metal.host)."""
    image = bytearray(17 * SECTOR)
    descriptor = bytearray(SECTOR)
    descriptor[0], descriptor[1:6], descriptor[6] = 1, b"CD001", 1
    width = ISO_VOLUME_ID.stop - ISO_VOLUME_ID.start
    descriptor[ISO_VOLUME_ID.start - 16 * SECTOR : ISO_VOLUME_ID.stop - 16 * SECTOR] = AGENT_VOLUME_ID.encode().ljust(
        width
    )
    image[16 * SECTOR :] = descriptor
    assert image[ISO9660_MAGIC_OFFSET : ISO9660_MAGIC_OFFSET + 5] == b"CD001"
    return bytes(image)


@dataclass
class Transition:
    """One status write, as a test may want to replay it."""

    time: float
    state: str
    operational_status: str
    error_type: str
    error_count: int
    powered_on: bool


class Metal3Controller:
    """BMO + Ironic for every BareMetalHost in ``api`` (all namespaces), against ``fleet``'s hosts.

    ``api``: the KubeEmulator serving the BareMetalHost CRD (``ModelplaneEmulator(extra_crds=(bmh_crd(),)).api``).
    ``fleet``: anything with ``hosts: dict[name, MetalHost]``; a BMH's host is the one named like the lab BMC
    its address points at (``.../bmc/<name>/redfish/v1/Systems/<id>``).
    ``ca_path``: the lab BMCs' CA (Ironic's trust bundle); ``spec.bmc.disableCertificateVerification`` skips it.
    ``dhcp``: whether the provisioning network has DHCP; the lab's has none, so a ramdisk needs
    ``spec.preprovisioningNetworkDataName``.
    """

    def __init__(
        self,
        api: KubeEmulator,
        fleet: Any,
        *,
        ca_path: str | None = None,
        delay_scale: float = 0.0,
        dhcp: bool = False,
        host: str = LOOPBACK,
    ) -> None:
        self.api = api
        self.fleet = fleet
        self.ca_path = ca_path
        self.delay_scale = delay_scale
        self.dhcp = dhcp
        self.errors: list[str] = []  # tracebacks of the controller's own failures (a test asserts it is empty)
        self.transitions: dict[tuple[str, str], list[Transition]] = {}
        # States the controller leaves hosts in until a test removes them: Ironic busy with a long step (a real
        # R730's image write or cleaning takes minutes), so a test can kill the collection's run mid-wait.
        self.held: set[str] = set()
        self._host = host
        self._workers: dict[str, threading.Thread] = {}
        self._kicks: dict[str, threading.Event] = {}  # uid -> set when the host changed since its worker looked
        self._seen: dict[str, Any] = {}  # uid -> what of the host, when changed, wakes its worker
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._root: Path | None = None
        self._changed = threading.Condition()

    # ------------------------------------------------------------------------------ lifecycle
    @property
    def ramdisk_url(self) -> str:
        assert self._httpd is not None, "start() first"
        return f"http://{self._host}:{self._httpd.server_address[1]}/{DEPLOY_ISO}"

    def start(self) -> Metal3Controller:
        self._root = Path(tempfile.mkdtemp(prefix="metal3-lab-"))
        (self._root / DEPLOY_ISO).write_bytes(deploy_iso_bytes())

        class _Quiet(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

        handler = functools.partial(_Quiet, directory=str(self._root))
        self._httpd = ThreadingHTTPServer((self._host, free_port(self._host)), handler)
        threading.Thread(target=self._httpd.serve_forever, name="metal3-httpd", daemon=True).start()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="metal3-controller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        for worker in list(self._workers.values()):
            worker.join(timeout=10)
        self._workers.clear()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def __enter__(self) -> Metal3Controller:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------ test helpers
    def get(self, namespace: str, name: str) -> Obj | None:
        return self.api.get(c.API_VERSION, c.KIND, name, namespace)

    def wait_for(
        self, namespace: str, name: str, predicate: Callable[[Obj | None], bool], timeout: float
    ) -> Obj | None:
        """Until ``predicate(the BareMetalHost or None)`` holds; raises TimeoutError with the last status."""
        deadline = time.monotonic() + timeout
        while True:
            bmh = self.get(namespace, name)
            if predicate(bmh):
                return bmh
            if time.monotonic() > deadline:
                msg = f"{namespace}/{name}: condition not met in {timeout} s; status {(bmh or {}).get('status')}"
                raise TimeoutError(msg)
            with self._changed:
                self._changed.wait(TICK)

    # ------------------------------------------------------------------------------ the loop
    def _loop(self) -> None:
        while not self._stop.wait(TICK):
            try:
                hosts = self.api.list(c.API_VERSION, c.KIND)
            except ApiError:
                continue
            for bmh in hosts:
                meta = bmh["metadata"]
                uid = meta["uid"]
                seen = (meta.get("generation"), meta.get("deletionTimestamp"), meta.get("annotations"),
                        meta.get("finalizers"))  # fmt: skip
                if self._seen.get(uid) != seen:
                    self._seen[uid] = seen
                    self._kicks.setdefault(uid, threading.Event()).set()
                worker = self._workers.get(uid)
                if worker is None or not worker.is_alive():
                    worker = threading.Thread(
                        target=self._work,
                        args=(meta["namespace"], meta["name"], uid),
                        name=f"metal3-{meta['name']}",
                        daemon=True,
                    )
                    self._workers[uid] = worker
                    worker.start()

    def _work(self, namespace: str, name: str, uid: str) -> None:
        kick = self._kicks.setdefault(uid, threading.Event())
        while not self._stop.is_set():
            kick.clear()
            try:
                bmh = self.get(namespace, name)
                if bmh is None or bmh["metadata"]["uid"] != uid:
                    self._kicks.pop(uid, None)
                    self._seen.pop(uid, None)
                    return
                wait = self._step(bmh)
            except ApiError as exc:
                if exc.code == 404:
                    return
                if exc.code != 409:  # a conflict: someone wrote meanwhile; read again
                    self.errors.append(traceback.format_exc())
                wait = TICK
            except Exception:
                self.errors.append(traceback.format_exc())
                wait = 1.0
            if wait is None:
                return
            deadline = time.monotonic() + wait
            while not self._stop.is_set() and not kick.is_set() and time.monotonic() < deadline:
                kick.wait(min(TICK, max(0.0, deadline - time.monotonic())))

    # ------------------------------------------------------------------------------ status
    def _write(self, bmh: Obj, status: Obj) -> None:
        meta = bmh["metadata"]
        status["lastUpdated"] = now_iso()
        self.api.set_status(c.API_VERSION, c.KIND, meta["name"], status, namespace=meta["namespace"], replace=True)
        key = (meta["namespace"], meta["name"])
        self.transitions.setdefault(key, []).append(
            Transition(
                time.time(),
                status["provisioning"]["state"],
                status["operationalStatus"],
                str(status.get("errorType", "")),
                int(status["errorCount"]),
                bool(status["poweredOn"]),
            )
        )
        with self._changed:
            self._changed.notify_all()

    @staticmethod
    def _history(status: Obj, operation: str, edge: str) -> None:
        history = status.setdefault("operationHistory", {})
        entry = history.setdefault(operation, {})
        if edge == "start":
            entry.clear()
        entry[edge] = now_iso()

    def _fail(self, bmh: Obj, status: Obj, failure: StepFailed) -> float:
        status["operationalStatus"] = c.OPERATIONAL_ERROR
        status["errorType"] = failure.error_type
        status["errorMessage"] = failure.message
        status["errorCount"] = int(status.get("errorCount", 0)) + 1
        if failure.error_type == c.ERROR_PROVISIONING and status["provisioning"]["state"] == c.STATE_PROVISIONING:
            status["provisioningFailCount"] = int(status.get("provisioningFailCount", 0)) + 1
        self._write(bmh, status)
        return backoff(status["errorCount"], self.delay_scale)

    @staticmethod
    def _complete(status: Obj, state: str) -> None:
        """An action completed: BMO clears the error (and its count) and moves on."""
        status["provisioning"]["state"] = state
        status["operationalStatus"] = c.OPERATIONAL_OK
        status["errorMessage"] = ""
        status["errorCount"] = 0
        status.pop("errorType", None)

    # ------------------------------------------------------------------------------ the state machine
    def _step(self, bmh: Obj) -> float | None:  # noqa: PLR0911 - one branch per state
        meta, spec = bmh["metadata"], bmh.get("spec") or {}
        status = {**initial_status(), **json.loads(json.dumps(bmh.get("status") or {}))}
        state = status["provisioning"]["state"]
        if meta.get("deletionTimestamp"):
            return self._delete(bmh, status)
        if c.FINALIZER not in (meta.get("finalizers") or []):
            finalizers = [*(meta.get("finalizers") or []), c.FINALIZER]
            self.api.patch(
                c.API_VERSION,
                c.KIND,
                meta["name"],
                {"metadata": {"finalizers": finalizers}},
                namespace=meta["namespace"],
            )
            return 0.0
        if state in self.held:
            return TICK
        if c.DETACHED_ANNOTATION in (meta.get("annotations") or {}):
            if status["operationalStatus"] != c.OPERATIONAL_DETACHED:
                status["operationalStatus"] = c.OPERATIONAL_DETACHED
                self._write(bmh, status)
            return TICK
        if status["operationalStatus"] == c.OPERATIONAL_DETACHED:
            status["operationalStatus"] = c.OPERATIONAL_OK
        if state == c.STATE_NONE:
            if not (spec.get("bmc") or {}).get("address"):
                status["operationalStatus"] = c.OPERATIONAL_DISCOVERED
                status["provisioning"]["state"] = c.STATE_UNMANAGED
            else:
                status["provisioning"]["state"] = c.STATE_REGISTERING
                self._history(status, "register", "start")
            self._write(bmh, status)
            return 0.0
        if state == c.STATE_UNMANAGED:
            if (spec.get("bmc") or {}).get("address"):
                status["provisioning"]["state"] = c.STATE_REGISTERING
                self._write(bmh, status)
            return TICK
        try:
            if state == c.STATE_REGISTERING:
                return self._register(bmh, status)
            if state == c.STATE_INSPECTING:
                return self._inspect(bmh, status)
            if state in (c.STATE_AVAILABLE, c.STATE_READY):
                return self._available(bmh, status)
            if state == c.STATE_PROVISIONING:
                return self._provision(bmh, status)
            if state == c.STATE_PROVISIONED:
                return self._provisioned(bmh, status)
            if state == c.STATE_DEPROVISIONING:
                return self._deprovision(bmh, status)
        except StepFailed as failure:
            return self._fail(bmh, status, failure)
        return TICK

    # ---- registering
    def _client(self, bmh: Obj) -> RedfishClient:
        """A Redfish client from ``spec.bmc`` and its credentials Secret; any problem is a registration error."""
        meta, spec = bmh["metadata"], bmh.get("spec") or {}
        bmc = spec.get("bmc") or {}
        try:
            address = c.parse_bmc_address(str(bmc.get("address", "")))
        except c.AddressError as exc:
            raise StepFailed(c.ERROR_REGISTRATION, str(exc)) from None
        secret_name = bmc.get("credentialsName")
        secret = self.api.get("v1", "Secret", secret_name, meta["namespace"]) if secret_name else None
        if secret is None:
            raise StepFailed(c.ERROR_REGISTRATION, f"failed to read BMC credentials: secret {secret_name!r} not found")
        username, password = (_secret_value(secret, key) for key in c.CREDENTIALS_KEYS)
        if not username:
            raise StepFailed(c.ERROR_REGISTRATION, "Missing BMC connection detail 'username' in credentials")
        if not password:
            raise StepFailed(c.ERROR_REGISTRATION, "Missing BMC connection details 'password' in credentials")
        return RedfishClient(
            address,
            username,
            password,
            ca_path=self.ca_path,
            verify=not bmc.get("disableCertificateVerification"),
            delay_scale=self.delay_scale,
        )

    def _register(self, bmh: Obj, status: Obj) -> float:
        meta, spec = bmh["metadata"], bmh.get("spec") or {}
        client = self._client(bmh)
        try:
            system = client.system()
        except RedfishFailure as exc:
            raise StepFailed(
                c.ERROR_REGISTRATION, f"Failed to connect to the BMC {client.address.base_url}: {exc}"
            ) from None
        self._sleep(REGISTER_SECONDS)
        secret = self.api.get("v1", "Secret", spec["bmc"]["credentialsName"], meta["namespace"]) or {}
        status["goodCredentials"] = {
            "credentials": {"name": spec["bmc"]["credentialsName"], "namespace": meta["namespace"]},
            "credentialsVersion": str((secret.get("metadata") or {}).get("resourceVersion", "")),
        }
        status["triedCredentials"] = status["goodCredentials"]
        status["provisioning"]["ID"] = str(uuid.uuid5(uuid.NAMESPACE_URL, meta["uid"]))
        status["poweredOn"] = system.get("PowerState") == "On"
        self._history(status, "register", "end")
        inspect = spec.get("inspectionMode") != c.INSPECTION_DISABLED
        self._complete(status, c.STATE_INSPECTING if inspect else c.STATE_AVAILABLE)
        if inspect:
            self._history(status, "inspect", "start")
        self._write(bmh, status)
        return 0.0

    # ---- the deploy ramdisk
    def _host_of(self, client: RedfishClient) -> MetalHost | None:
        name = client.address.bmc_name
        return self.fleet.hosts.get(name) if name else None

    def _agent_networks(self, bmh: Obj) -> dict[str, Any] | None:
        name = (bmh.get("spec") or {}).get("preprovisioningNetworkDataName")
        if not name:
            return None
        secret = self.api.get("v1", "Secret", name, bmh["metadata"]["namespace"])
        text = _secret_value(secret, c.NETWORK_DATA_KEY)
        if text is None:
            raise StepFailed(
                c.ERROR_REGISTRATION,
                f"failed to read preprovisioningNetworkData: secret {name!r} has no key {c.NETWORK_DATA_KEY!r}",
            )
        return yaml.safe_load(text)

    def _boot_agent(self, bmh: Obj, client: RedfishClient, error_type: str) -> MetalHost:
        """Ironic's virtual media boot of the deploy ramdisk, then its wait for the agent's callback."""
        system = self._redfish(client.system, error_type)
        if client.address.driver == c.REDFISH_VIRTUALMEDIA and client.is_dell(system):
            raise StepFailed(
                error_type,
                f"The redfish-virtual-media boot interface is not suitable for node {self._node(bmh)} with vendor "
                f"{system.get('Manufacturer')}, use idrac-redfish-virtual-media instead (BMC address scheme "
                f"{c.IDRAC_VIRTUALMEDIA})",
            )
        host = self._host_of(client)
        agent_net = self._agent_networks(bmh)
        self._redfish(client.power_off, error_type)
        slot = self._redfish(lambda: client.cd_slot(system), error_type)
        self._redfish(lambda: client.eject(slot), error_type)
        try:
            client.insert(slot, self.ramdisk_url)
        except RedfishFailure as exc:
            raise StepFailed(error_type, f"Virtual media mount failed for {self.ramdisk_url}: {exc}") from None
        if client.address.driver == c.IDRAC_VIRTUALMEDIA:
            self._redfish(lambda: client.dell_boot_once_virtual_cd(system), error_type)
        else:
            self._redfish(lambda: client.set_boot("Cd", "Once"), error_type)
        boots = len(host.log.boots) if host is not None else 0
        self._redfish(client.power_on, error_type)
        booted = host is not None and host.wait_for(
            lambda h: len(h.log.boots) > boots and h.phase not in ("post", "off", "power-transition"),
            max(AGENT_BOOT_SECONDS * self.delay_scale, AGENT_BOOT_FLOOR),
        )
        if host is None:
            raise StepFailed(error_type, f"the deploy ramdisk did not boot on node {self._node(bmh)} (no host answers "
                             "behind this BMC)")  # fmt: skip
        if not booted or host.phase != AGENT_RUNNING:
            # Ironic cannot see what the server booted (the disk's OS, when the one-time boot was lost): it waits
            # for the agent's callback. A restart into the ramdisk meanwhile (the boot order cured) still calls
            # back in time; otherwise the step fails with Ironic's deploy timeout.
            why = f"{host.phase}: {host.reason}"
            if not self._wait_agent(host, AGENT_CALLBACK_TIMEOUT * self.delay_scale):
                raise StepFailed(
                    error_type,
                    f"Timeout reached while waiting for callback for node {self._node(bmh)} (the deploy ramdisk "
                    f"did not boot: {why})",
                )
        problem = (
            None
            if (agent_net is None and self.dhcp)
            else network_problem([vars(n) for n in networks_from(agent_net)], host.identity)
        )
        if problem is not None:
            self._stop.wait(AGENT_CALLBACK_TIMEOUT * self.delay_scale)
            raise StepFailed(
                error_type,
                f"Timeout reached while waiting for callback for node {self._node(bmh)} (the deploy ramdisk has no "
                f"address: {problem})",
            )
        return host

    def _wait_agent(self, host: MetalHost, timeout: float) -> bool:
        """Whether the host runs the agent within ``timeout`` seconds (in slices, so ``stop()`` is not held up)."""
        deadline = time.monotonic() + timeout
        while not self._stop.is_set():
            slice_end = min(deadline, time.monotonic() + 1.0)
            if host.wait_for(lambda h: h.phase == AGENT_RUNNING, max(0.0, slice_end - time.monotonic())):
                return True
            if time.monotonic() >= deadline:
                return False
        return False

    def _agent_done(self, client: RedfishClient, error_type: str) -> None:
        """Ironic after an agent operation: eject the ramdisk, power the host off."""
        system = self._redfish(client.system, error_type)
        slot = self._redfish(lambda: client.cd_slot(system), error_type)
        self._redfish(lambda: client.eject(slot), error_type)
        self._redfish(client.power_off, error_type)

    # ---- inspecting
    def _inspect(self, bmh: Obj, status: Obj) -> float:
        client = self._client(bmh)
        host = self._boot_agent(bmh, client, c.ERROR_INSPECTION)
        self._sleep(INSPECT_SECONDS)
        system = self._redfish(client.system, c.ERROR_INSPECTION)
        self._agent_done(client, c.ERROR_INSPECTION)
        ident = host.identity
        status["hardware"] = {
            "hostname": host.name,
            "systemVendor": {
                "manufacturer": str(system.get("Manufacturer", "")),
                "productName": str(system.get("Model", "")),
                "serialNumber": str(system.get("SerialNumber", "")),
            },
            "cpu": {
                "arch": CPU_ARCH,
                "count": int((system.get("ProcessorSummary") or {}).get("Count", 0)),
                "model": str((system.get("ProcessorSummary") or {}).get("Model", "")),
            },
            "ramMebibytes": int((system.get("MemorySummary") or {}).get("TotalSystemMemoryGiB", 0)) * 1024,
            "nics": [
                {"name": f"eno{index + 1}", "mac": mac, "pxe": index == 0} for index, mac in enumerate(ident.macs)
            ],
            "storage": [
                {
                    "name": ident.disk.device,
                    "alternateNames": sorted(n for n in ident.disk.names() if n.startswith("/dev/")),
                    "serialNumber": ident.disk.serial,
                    "wwn": ident.disk.wwn,
                    "model": ident.disk.model,
                    "vendor": DISK_VENDOR,
                    "hctl": DISK_HCTL,
                    "type": "HDD",
                    "rotational": True,
                    "sizeBytes": DISK_SIZE_GB * 10**9,
                }
            ],
        }
        status["poweredOn"] = False
        self._history(status, "inspect", "end")
        self._complete(status, c.STATE_AVAILABLE)
        self._write(bmh, status)
        return 0.0

    # ---- stable states: power follows spec.online
    def _power(self, bmh: Obj, status: Obj) -> float:
        client = self._client(bmh)
        online = bool((bmh.get("spec") or {}).get("online"))
        self._redfish(client.power_on if online else client.power_off, c.ERROR_POWER_MANAGEMENT)
        powered = self._redfish(client.power_state, c.ERROR_POWER_MANAGEMENT) == "On"
        if powered != status["poweredOn"] or status["operationalStatus"] != c.OPERATIONAL_OK:
            status["poweredOn"] = powered
            self._complete(status, status["provisioning"]["state"])
            self._write(bmh, status)
        return STABLE_POLL

    def _available(self, bmh: Obj, status: Obj) -> float:
        image = ((bmh.get("spec") or {}).get("image") or {}).get("url")
        if image:
            status["provisioning"]["state"] = c.STATE_PROVISIONING
            self._history(status, "provision", "start")
            self._write(bmh, status)
            return 0.0
        return self._power(bmh, status)

    def _provisioned(self, bmh: Obj, status: Obj) -> float:
        wanted = ((bmh.get("spec") or {}).get("image") or {}).get("url")
        if wanted != (status["provisioning"].get("image") or {}).get("url"):
            status["provisioning"]["state"] = c.STATE_DEPROVISIONING
            self._history(status, "deprovision", "start")
            self._write(bmh, status)
            return 0.0
        return self._power(bmh, status)

    # ---- provisioning
    def _secret_text(self, bmh: Obj, ref: Obj | None, key: str) -> str | None:
        if not ref or not ref.get("name"):
            return None
        namespace = ref.get("namespace") or bmh["metadata"]["namespace"]
        secret = self.api.get("v1", "Secret", ref["name"], namespace)
        value = _secret_value(secret, key)
        if value is None:
            raise StepFailed(
                c.ERROR_PROVISIONING, f"failed to read {key}: secret {namespace}/{ref['name']} has no key {key!r}"
            )
        return value

    def _provision(self, bmh: Obj, status: Obj) -> float:
        spec = bmh.get("spec") or {}
        image = spec.get("image") or {}
        if not image.get("url"):  # the image was removed while provisioning failed: tear down
            status["provisioning"]["state"] = c.STATE_DEPROVISIONING
            self._history(status, "deprovision", "start")
            self._write(bmh, status)
            return 0.0
        if image.get("format") != "live-iso" and not image.get("checksum"):
            raise StepFailed(c.ERROR_PROVISIONING, "the image checksum is required (spec.image.checksum)")
        user_data = self._secret_text(bmh, spec.get("userData"), c.USER_DATA_KEY)
        network_text = self._secret_text(bmh, spec.get("networkData"), c.NETWORK_DATA_KEY)
        try:
            network_data = json.loads(network_text) if network_text else None
            config = install_config(user_data, network_data, image=str(image["url"]))
        except (ValueError, ConfigDriveError) as exc:
            raise StepFailed(c.ERROR_PROVISIONING, f"the config drive cannot be built: {exc}") from None
        client = self._client(bmh)
        status["lastAttemptedImage"] = image
        host = self._boot_agent(bmh, client, c.ERROR_PROVISIONING)
        hints = spec.get("rootDeviceHints")
        problem = root_device_problem(hints, host.identity.disk)
        if problem is not None:
            self._agent_done(client, c.ERROR_PROVISIONING)
            status["poweredOn"] = False
            raise StepFailed(c.ERROR_PROVISIONING, problem)
        self._sleep(WRITE_IMAGE_SECONDS)
        host.image_written(config)
        system = self._redfish(client.system, c.ERROR_PROVISIONING)
        slot = self._redfish(lambda: client.cd_slot(system), c.ERROR_PROVISIONING)
        self._redfish(lambda: client.eject(slot), c.ERROR_PROVISIONING)
        self._redfish(lambda: client.set_boot("Hdd", "Continuous"), c.ERROR_PROVISIONING)  # boot from the disk now on
        self._redfish(client.power_off, c.ERROR_PROVISIONING)
        if spec.get("online"):
            self._redfish(client.power_on, c.ERROR_PROVISIONING)
        status["poweredOn"] = bool(spec.get("online"))
        boot_mode = spec.get("bootMode") or "UEFI"
        status["provisioning"].update(image=image, bootMode=boot_mode)
        if hints:
            status["provisioning"]["rootDeviceHints"] = hints
        status["provisioningFailCount"] = 0
        self._history(status, "provision", "end")
        self._complete(status, c.STATE_PROVISIONED)
        self._write(bmh, status)
        return 0.0

    # ---- deprovisioning
    def _deprovision(self, bmh: Obj, status: Obj) -> float:
        spec = bmh.get("spec") or {}
        client = self._client(bmh)
        if spec.get("automatedCleaningMode", c.CLEANING_METADATA) == c.CLEANING_METADATA:
            host = self._boot_agent(bmh, client, c.ERROR_PROVISIONING)
            host.metadata_cleaned()
            self._agent_done(client, c.ERROR_PROVISIONING)
        else:
            self._redfish(client.power_off, c.ERROR_PROVISIONING)
        status["poweredOn"] = False
        for key in ("image", "rootDeviceHints", "bootMode"):
            status["provisioning"].pop(key, None)
        self._history(status, "deprovision", "end")
        self._complete(status, c.STATE_AVAILABLE)
        self._write(bmh, status)
        return 0.0

    # ---- deletion
    def _delete(self, bmh: Obj, status: Obj) -> float | None:
        meta = bmh["metadata"]
        state = status["provisioning"]["state"]
        if c.FINALIZER not in (meta.get("finalizers") or []):
            return None
        if state not in (c.STATE_POWERING_OFF_BEFORE_DELETE, c.STATE_DELETING):
            status["provisioning"]["state"] = c.STATE_POWERING_OFF_BEFORE_DELETE
            self._write(bmh, status)
            return 0.0
        if state == c.STATE_POWERING_OFF_BEFORE_DELETE:
            if status.get("goodCredentials"):
                try:
                    client = self._client(bmh)
                    self._redfish(client.power_off, c.ERROR_POWER_MANAGEMENT)
                except StepFailed as failure:
                    return self._fail(bmh, status, failure)
            status["poweredOn"] = False
            status["provisioning"]["state"] = c.STATE_DELETING
            self._write(bmh, status)
            return 0.0
        remaining = [f for f in meta.get("finalizers") or [] if f != c.FINALIZER]
        self.api.patch(
            c.API_VERSION,
            c.KIND,
            meta["name"],
            {"metadata": {"finalizers": remaining or None}},
            namespace=meta["namespace"],
        )
        return None

    # ------------------------------------------------------------------------------ helpers
    def _sleep(self, seconds: float) -> None:
        if seconds * self.delay_scale > 0:
            self._stop.wait(seconds * self.delay_scale)

    @staticmethod
    def _node(bmh: Obj) -> str:
        """Ironic's node name for a BMH, as BMO registers it (``<namespace>~<name>``)."""
        return f"{bmh['metadata']['namespace']}~{bmh['metadata']['name']}"

    @staticmethod
    def _redfish(call: Callable[[], Any], error_type: str) -> Any:
        try:
            return call()
        except RedfishFailure as exc:
            raise StepFailed(error_type, f"BMC request failed: {exc}") from None


__all__ = [
    "DEPLOY_ISO",
    "Metal3Controller",
    "StepFailed",
    "Transition",
    "backoff",
    "deploy_iso_bytes",
    "initial_status",
    "root_device_problem",
]
