"""DMTF's Redfish Service Validator (PyPI ``redfish-service-validator``) against each personality.

Why: an emulator nobody here wrote should judge whether ours is a well-formed Redfish service.

The validator checks every property's type, allowed values and URI against DMTF's CSDL schemas
(DSP8010). ``make test`` fetches DSP8010 2018.2 from PyPI, checksum-verified, into
``.build/dmtf-csdl`` (``scripts/fetch-dmtf-csdl.sh``; ``REDFISH_SCHEMA_DIR`` points elsewhere).
Every FAIL and WARN must be one of the ``KNOWN`` findings below, each with its cause: Dell OEM
types that no public CSDL describes, and versions newer than the 2018.2 bundle that the emulator
declares because the real BMCs do. Anything else (a wrong type, a bad enum value, an unknown
property, a broken link) fails the test.

Without the bundle the test fails, unless ``MP_NO_DMTF_CSDL=1`` (no PyPI): then it runs the
validator's link crawl only, where every resource is one "no schema definition" warning.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab.redfish.bmc import BmcState
from lab.redfish.server import BmcSpec, RedfishLab
from lab.redfish.tree import R, Tree

pytest.importorskip("redfish_service_validator")

REPO = Path(__file__).resolve().parents[3]
VALIDATOR = Path(sys.executable).with_name("rf_service_validator")
SUMMARY = re.compile(r"\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|")
PINNED_SCHEMA_DIR = REPO / ".build" / "dmtf-csdl" / "DSP8010_2018.2"
SCHEMA_DIR = Path(os.environ.get("REDFISH_SCHEMA_DIR") or PINNED_SCHEMA_DIR)
NO_CSDL = os.environ.get("MP_NO_DMTF_CSDL") == "1"
# Well above what a link crawl yields (0): proves that properties are validated. Measured with
# DSP8010 2018.2: generic 334, idrac8 317, idrac9 355 properties passed.
MIN_PASSED = 250

# Resources the crawl must reach (canonical paths), per personality.
MUST_REACH = {
    "idrac8": [
        "/redfish/v1/Systems/System.Embedded.1",
        "/redfish/v1/Systems/System.Embedded.1/Bios",
        "/redfish/v1/Systems/System.Embedded.1/BootSources",
        "/redfish/v1/Systems/System.Embedded.1/EthernetInterfaces/NIC.Integrated.1-1-1",
        "/redfish/v1/Systems/System.Embedded.1/PCIeDevices/59-0",
        "/redfish/v1/Managers/iDRAC.Embedded.1",
        "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs",
        "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD",
        "/redfish/v1/Chassis/System.Embedded.1",
        "/redfish/v1/SessionService/Sessions",
    ],
    "idrac9": [
        "/redfish/v1/Systems/System.Embedded.1",
        "/redfish/v1/Systems/System.Embedded.1/BootOptions/Boot0001",
        "/redfish/v1/Systems/System.Embedded.1/VirtualMedia/1",
        "/redfish/v1/Chassis/System.Embedded.1/PCIeDevices/130-0",
        "/redfish/v1/Managers/iDRAC.Embedded.1",
        "/redfish/v1/Dell/Managers/iDRAC.Embedded.1/DellLCService",
        "/redfish/v1/TaskService",
    ],
    "generic": [
        "/redfish/v1/Systems/1",
        "/redfish/v1/Systems/1/BootOptions/Boot0003",
        "/redfish/v1/Systems/1/SecureBoot",
        "/redfish/v1/Systems/1/VirtualMedia/Cd",
        "/redfish/v1/Chassis/1/PCIeDevices/59-0",
        "/redfish/v1/Managers/1",
        "/redfish/v1/TaskService/Tasks",
    ],
}


@dataclass(frozen=True)
class Known:
    """One accepted validator finding, with its cause.

    It matches a finding of severity ``level`` on a resource whose ``@odata.type`` is
    ``odata_type``, at the validator's property path ``prop`` ("" for the resource itself), whose
    message fully matches the pattern ``error``; and, where given, whose value matches ``value``.
    """

    personalities: frozenset[str]
    level: str
    odata_type: str
    prop: str
    error: str
    why: str
    value: str | None = None

    def matches(self, personality: str, finding: Finding) -> bool:
        return (
            personality in self.personalities
            and (self.level, self.odata_type, self.prop) == (finding.level, finding.odata_type, finding.prop)
            and re.fullmatch(self.error, finding.message) is not None
            and (self.value is None or re.fullmatch(self.value, finding.value or "") is not None)
        )


@dataclass(frozen=True)
class Finding:
    uri: str
    odata_type: str
    level: str
    prop: str
    value: str | None
    message: str


ALL = frozenset(MUST_REACH)
DELL = frozenset({"idrac8", "idrac9"})
NEW = frozenset({"idrac9", "generic"})  # the personalities that declare 2019+ versions
I8, I9 = frozenset({"idrac8"}), frozenset({"idrac9"})
# Message patterns (re.fullmatch) of the validator's findings that KNOWN accepts.
FALLBACK = (
    r"Schema Error: Unable to locate the schema definition for the '[\w.]+' type; "
    r"using the type '[\w.]+' as a fallback\."
)
NO_SCHEMA = r"Schema Error: Unable to locate the schema definition for the '[#\w.]+' (type|action)\."
UNKNOWN = r"Unknown Property Error: The property '[#\w.]+' is not defined in the '[\w.]+' type\."
URI = r"Undefined URI Error: The URI is not in the list of allowed URIs for the resource\."
B2018 = "DSP8010 2018.2"
KNOWN: tuple[Known, ...] = (
    # (c) Versions the emulator declares, like the real BMCs, that are newer than the 2018.2 bundle:
    # the validator falls back to the newest version it has (a FAIL) and then flags what the newer
    # version added as unknown. Not downgraded: the modules must meet the versions the BMCs send.
    Known(ALL, "FAIL", "ServiceRoot.v1_5_0.ServiceRoot", "", FALLBACK, f"{B2018} stops at ServiceRoot v1_4_0"),
    Known(ALL, "FAIL", "ServiceRoot.v1_5_0.ServiceRoot", "/Vendor", UNKNOWN, "Vendor: ServiceRoot v1_5_0"),
    Known(
        NEW, "FAIL", "ComputerSystem.v1_13_0.ComputerSystem", "", FALLBACK, f"{B2018} stops at ComputerSystem v1_5_1"
    ),
    Known(NEW, "FAIL", "ComputerSystem.v1_13_0.ComputerSystem", "/VirtualMedia", UNKNOWN, "ComputerSystem v1_13_0"),
    Known(NEW, "FAIL", "Manager.v1_10_0.Manager", "", FALLBACK, f"{B2018} stops at Manager v1_5_0"),
    Known(NEW, "FAIL", "Chassis.v1_14_0.Chassis", "", FALLBACK, f"{B2018} stops at Chassis v1_8_0"),
    Known(NEW, "FAIL", "Chassis.v1_14_0.Chassis", "/PCIeDevices", UNKNOWN, "PCIeDevices: Chassis v1_10_0"),
    Known(NEW, "FAIL", "VirtualMedia.v1_4_0.VirtualMedia", "", FALLBACK, f"{B2018} stops at VirtualMedia v1_2_1"),
    Known(ALL, "FAIL", "PCIeDevice.v1_4_0.PCIeDevice", "", FALLBACK, f"{B2018} stops at PCIeDevice v1_3_0"),
    Known(NEW, "FAIL", "BootOption.v1_0_4.BootOption", "", FALLBACK, f"{B2018} stops at BootOption v1_0_1"),
    Known(DELL, "FAIL", "Task.v1_4_2.Task", "", FALLBACK, f"{B2018} stops at Task v1_3_0"),
    Known(DELL, "FAIL", "Task.v1_4_2.Task", "/PercentComplete", UNKNOWN, "PercentComplete: Task v1_4_0"),
    Known(NEW, "WARN", "PCIeDeviceCollection.PCIeDeviceCollection", "", NO_SCHEMA, f"not in {B2018} (added 2019)"),
    # URIs that the 2018.2 schemas do not list: iDRAC's root says "/redfish/v1" (2018.2 lists only
    # "/redfish/v1/"), and VirtualMedia under the System is ComputerSystem v1_13_0 (2018.2: Managers).
    Known(ALL, "FAIL", "ServiceRoot.v1_5_0.ServiceRoot", "/@odata.id", URI, "no trailing slash", r"/redfish/v1"),
    Known(
        NEW,
        "FAIL",
        "VirtualMediaCollection.VirtualMediaCollection",
        "/@odata.id",
        URI,
        "System VirtualMedia",
        r"/redfish/v1/Systems/[^/]+/VirtualMedia",
    ),
    Known(
        NEW,
        "FAIL",
        "VirtualMedia.v1_4_0.VirtualMedia",
        "/@odata.id",
        URI,
        "System VirtualMedia",
        r"/redfish/v1/Systems/[^/]+/VirtualMedia/[^/]+",
    ),
    # (b) Dell OEM: Dell publishes no CSDL for its OEM namespaces, so the validator cannot check
    # them (a WARN), and it does not know iDRAC8's "OemManager.v1_0_0#OemManager.X" action keys
    # (a FAIL; iDRAC9 firmware writes the DSP0266 form "#OemManager.X", a WARN).
    Known(DELL, "WARN", "DellBootSources.v1_0_0.DellBootSources", "", NO_SCHEMA, "Dell OEM resource"),
    Known(DELL, "WARN", "DellJobCollection.DellJobCollection", "", NO_SCHEMA, "Dell OEM resource"),
    Known(DELL, "WARN", "DellJob.v1_0_0.DellJob", "", NO_SCHEMA, "Dell OEM resource"),
    Known(DELL, "WARN", "Task.v1_4_2.Task", "/Oem/Dell", NO_SCHEMA, "Dell OEM object (DellJob)"),
    Known(I9, "WARN", "DellJobService.v1_1_0.DellJobService", "", NO_SCHEMA, "Dell OEM resource"),
    Known(I9, "WARN", "DellLCService.v1_1_0.DellLCService", "", NO_SCHEMA, "Dell OEM resource"),
    Known(I9, "WARN", "DelliDRACCardService.v1_1_0.DelliDRACCardService", "", NO_SCHEMA, "Dell OEM resource"),
    Known(I8, "WARN", "ComputerSystem.v1_5_0.ComputerSystem", "/Oem/Dell", NO_SCHEMA, "DellOemResources"),
    Known(I9, "WARN", "ComputerSystem.v1_13_0.ComputerSystem", "/Oem/Dell", NO_SCHEMA, "DellOemResources"),
    Known(I8, "WARN", "ComputerSystem.v1_5_0.ComputerSystem", "/Links/Oem/Dell", NO_SCHEMA, "DellOemLinks"),
    Known(I9, "WARN", "ComputerSystem.v1_13_0.ComputerSystem", "/Links/Oem/Dell", NO_SCHEMA, "DellOemLinks"),
    Known(I8, "WARN", "Manager.v1_3_3.Manager", "/Links/Oem/Dell", NO_SCHEMA, "DellOemLinks"),
    Known(I9, "WARN", "Manager.v1_10_0.Manager", "/Links/Oem/Dell", NO_SCHEMA, "DellOemLinks"),
    Known(
        I8,
        "FAIL",
        "Manager.v1_3_3.Manager",
        "/Actions/Oem/OemManager.v1_0_0#OemManager.ImportSystemConfiguration",
        UNKNOWN,
        "Dell SCP import action, iDRAC8 key form",
    ),
    Known(
        I8,
        "FAIL",
        "Manager.v1_3_3.Manager",
        "/Actions/Oem/OemManager.v1_0_0#OemManager.ExportSystemConfiguration",
        UNKNOWN,
        "Dell SCP export action, iDRAC8 key form",
    ),
    Known(
        I9,
        "WARN",
        "Manager.v1_10_0.Manager",
        "/Actions/Oem/#OemManager.ImportSystemConfiguration",
        NO_SCHEMA,
        "Dell SCP import action",
    ),
    Known(
        I9,
        "WARN",
        "Manager.v1_10_0.Manager",
        "/Actions/Oem/#OemManager.ExportSystemConfiguration",
        NO_SCHEMA,
        "Dell SCP export action",
    ),
)


LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - \S+ - [A-Z]+ - (.*)$")
VALIDATING = re.compile(r"^Validating (\S+)\.\.\.$")
PROPERTY_FINDING = re.compile(r"^(FAIL|WARN) - (/\S*) \((.*?)\): (.*)$")
RESOURCE_FINDING = re.compile(r"^(FAIL|WARN) - (.*)$")


def findings_from_log(log_text: str, types: dict[str, str]) -> list[Finding]:
    """Every FAIL/WARN in the validator's debug log, attributed to the resource being validated."""
    found: list[Finding] = []
    uri = ""
    for line in log_text.splitlines():
        match = LOG_LINE.match(line)
        if not match:
            continue
        message = match.group(1)
        if validating := VALIDATING.match(message):
            uri = validating.group(1)
        elif prop_match := PROPERTY_FINDING.match(message):
            level, prop, value, text = prop_match.groups()
            found.append(Finding(uri, types.get(uri, "?"), level, prop, value, text))
        elif res_match := RESOURCE_FINDING.match(message):
            level, text = res_match.groups()
            found.append(Finding(uri, types.get(uri, "?"), level, "", None, text))
    return found


def seed_jobs(state: BmcState) -> list[str]:
    """A finished SCP import (a Task and a Dell Job) and a pending BIOS job, so the crawl meets them."""
    if not state.p.dell:
        return []  # a plain DMTF BMC here has no task producer
    tree = Tree(state)
    with state.lock:
        task = state.create_job("ImportConfiguration", "Import Configuration", None, state="Running")
        bios = state.create_job("BIOSConfiguration", "ConfigBIOS:BIOS.Setup.1-1", f"{tree.S}/Bios/Settings")
    return [f"{R}/TaskService/Tasks/{task['Id']}", f"{tree.M}/Jobs/{task['Id']}", f"{tree.M}/Jobs/{bios['Id']}"]


@dataclass(frozen=True)
class Run:
    output: str  # the validator's stdout + stderr
    returncode: int
    log_text: str  # its debug log
    types: dict[str, str]  # @odata.type of every resource it validated, by the URI it used
    not_found: list[str]  # paths the emulator answered 404
    seeded: list[str]  # resources seed_jobs made


def run_validator(personality: str, tmp_path: Path, schemas: Path) -> Run:
    with RedfishLab(bmcs=[BmcSpec(name="bmc", personality=personality, port=0)], delay_scale=0.0) as lab:
        seeded = seed_jobs(lab.bmc("bmc"))
        # The validator joins @odata.id paths onto the host, so it needs the BMC at a port's root.
        result = subprocess.run(
            [
                str(VALIDATOR),
                "--rhost",
                lab.port_url("bmc"),
                "--user",
                "root",
                "--password",
                "calvin",
                "--authtype",
                "Session",
                "--schema_directory",
                str(schemas),
                "--skipschema",
                "--logdir",
                str(tmp_path / "logs"),
                "--timeout",
                "10",
            ],
            env={**os.environ, "REQUESTS_CA_BUNDLE": lab.ca_path},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        state = lab.bmc("bmc")
        not_found = [r.path for r in state.requests if r.status == 404]
        validated = re.findall(r"^Validating (\S+)\.\.\.$", result.stdout, re.MULTILINE)
        tree = Tree(state)
        types = {}
        for uri in validated:
            with state.lock:
                doc = tree.get(uri.rstrip("/"), "") or {}
            types[uri] = str(doc.get("@odata.type", "?")).lstrip("#")  # "?" matches no KNOWN entry
    output = result.stdout + result.stderr
    assert result.returncode in (0, 1), output[-3000:]  # 1: some FAIL; anything else: it broke
    logs = list((tmp_path / "logs").glob("*/RedfishServiceValidatorDebug_*.log"))
    assert len(logs) == 1, output[-3000:]
    return Run(output, result.returncode, logs[0].read_text(), types, not_found, seeded)


@pytest.mark.slow
@pytest.mark.parametrize("personality", sorted(MUST_REACH))
def test_service_validator(personality: str, tmp_path: Path) -> None:
    schemas = tmp_path / "schemas"
    if NO_CSDL:
        schemas.mkdir()
    else:
        if not (SCHEMA_DIR / "ServiceRoot_v1.xml").is_file():
            pytest.fail(
                f"no DMTF CSDL at {SCHEMA_DIR}: run `make dmtf-csdl` (PyPI), set REDFISH_SCHEMA_DIR to an "
                "unpacked DSP8010 csdl directory, or MP_NO_DMTF_CSDL=1 for the link crawl only"
            )
        shutil.copytree(SCHEMA_DIR, schemas)
    run = run_validator(personality, tmp_path, schemas)
    output = run.output
    totals = SUMMARY.findall(output)
    assert totals, output[-3000:]
    passed, warned, failed, not_tested = map(int, totals[-1])
    validated = set(run.types)
    print(
        f"{personality}: pass={passed} warn={warned} fail={failed} not_tested={not_tested} resources={len(validated)}"
    )
    missing = [uri for uri in MUST_REACH[personality] + run.seeded if uri not in validated]
    assert not missing, f"the crawl did not reach {missing}"
    assert run.not_found == []  # no broken link anywhere
    if NO_CSDL:
        # Without DSP8010 every resource is one "no schema definition" warning, and nothing passes.
        assert (passed, warned, failed) == (0, len(validated), 0), output[-5000:]
        return

    findings = findings_from_log(run.log_text, run.types)
    # The log parse saw every finding the summary counted (a format change cannot hide one).
    assert (sum(f.level == "FAIL" for f in findings), sum(f.level == "WARN" for f in findings)) == (failed, warned)
    assert run.returncode == int(failed > 0)
    unexpected = [f for f in findings if not any(k.matches(personality, f) for k in KNOWN)]
    assert not unexpected, "findings not in KNOWN:\n" + "\n".join(map(repr, unexpected))
    assert passed >= MIN_PASSED
    if SCHEMA_DIR == PINNED_SCHEMA_DIR:
        # Every entry still happens: a fixed emulator or a newer bundle must shrink KNOWN.
        stale = [
            k for k in KNOWN if personality in k.personalities and not any(k.matches(personality, f) for f in findings)
        ]
        assert not stale, "KNOWN entries that no longer happen:\n" + "\n".join(map(repr, stale))
