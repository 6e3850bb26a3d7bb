"""DMTF's Redfish Service Validator (PyPI ``redfish-service-validator``) against each personality.

Why: an emulator nobody here wrote should judge whether ours is a well-formed Redfish service.

What it can check here: the validator needs DMTF's CSDL schema bundle (DSP8010), which it
downloads from dmtf.org; this machine reaches only package registries and no PyPI package ships
the bundle. Without it the validator still logs in with a session, walks every link from the
service root (a broken link is a FAIL), and checks every ``@odata.type``/``@odata.id``, but every
resource gets one WARN ("Unable to locate the schema definition"): it does *not* check property
types or allowed values. Point ``REDFISH_SCHEMA_DIR`` at an unpacked DSP8010 ``csdl`` directory
to run the full schema validation (then any FAIL fails this test).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.redfish import BmcSpec, RedfishLab

pytest.importorskip("redfish_service_validator")

VALIDATOR = Path(sys.executable).with_name("rf_service_validator")
SUMMARY = re.compile(r"\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|")
SCHEMA_DIR = os.environ.get("REDFISH_SCHEMA_DIR")

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
        "/redfish/v1/Systems/1/VirtualMedia/Cd",
        "/redfish/v1/Chassis/1/PCIeDevices/59-0",
        "/redfish/v1/Managers/1",
        "/redfish/v1/TaskService/Tasks",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("personality", sorted(MUST_REACH))
def test_service_validator(personality: str, tmp_path: Path) -> None:
    schemas = tmp_path / "schemas"
    if SCHEMA_DIR:
        shutil.copytree(SCHEMA_DIR, schemas)
    else:
        schemas.mkdir()
    with RedfishLab(bmcs=[BmcSpec(name="bmc", personality=personality, port=0)], delay_scale=0.0) as lab:
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
        log = lab.bmc("bmc").requests
    output = result.stdout + result.stderr
    totals = SUMMARY.findall(output)
    assert totals, output[-3000:]
    passed, warned, failed, not_tested = map(int, totals[-1])
    validated = set(re.findall(r"^Validating (\S+)\.\.\.$", result.stdout, re.MULTILINE))
    print(
        f"{personality}: pass={passed} warn={warned} fail={failed} not_tested={not_tested} resources={len(validated)}"
    )
    assert failed == 0, output[-5000:]
    assert result.returncode == 0
    missing = [uri for uri in MUST_REACH[personality] if uri not in validated]
    assert not missing, f"the crawl did not reach {missing}"
    assert [r.path for r in log if r.status == 404] == []  # no broken link anywhere
    if not SCHEMA_DIR:
        # Without DSP8010 every resource is one "no schema definition" warning, and nothing passes.
        assert (passed, warned) == (0, len(validated))
