"""sushy-tools' Redfish emulator (fake driver) in-process on 127.0.0.1, over TLS with Basic auth.

Why: an emulator nobody here wrote is the check that the generic paths (power, one-time boot,
virtual media) speak standard Redfish and not just what our own lab expects (openstack/sushy-tools,
``sushy-emulator`` with ``SUSHY_EMULATOR_FAKE_DRIVER``).
Used by the cross-check tests and by ``tests/bench/bench_redfish.py``.
"""

from __future__ import annotations

import datetime
import ipaddress
import tempfile
import threading
from pathlib import Path
from typing import Any

SYSTEM_UUID = "4c4c4544-0042-3010-8052-b4c04f4b3232"
USERNAME = "root"
PASSWORD = "calvin"


def write_tls_files(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (it is its own CA: use it as the modules' ``ca_cert``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class SushyToolsBmc:
    """``start()`` / ``stop()``; ``url`` is the module's ``bmc_url``, ``ca_path`` its CA."""

    def __init__(self, power_state: str = "Off", power_delay: int | None = 1) -> None:
        self.power_state = power_state
        self.power_delay = power_delay  # seconds; None keeps the fake driver's random 1-11 s
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._saved_randint: Any = None
        self.url = ""
        self.ca_path = ""
        self.system_path = f"/redfish/v1/Systems/{SYSTEM_UUID}"

    def start(self) -> SushyToolsBmc:
        import bcrypt
        from sushy_tools.emulator import main as emulator_main
        from sushy_tools.emulator.resources.systems import fakedriver
        from werkzeug.serving import make_server

        self._tmp = tempfile.TemporaryDirectory(prefix="sushy-tools-")
        tmp = Path(self._tmp.name)
        cert, key = write_tls_files(tmp)
        htpasswd = tmp / "htpasswd"
        # rounds=4: the emulator checks the hash on every request; the default cost makes each ~0.3 s
        htpasswd.write_text(f"{USERNAME}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()}\n")
        if self.power_delay is not None:
            self._saved_randint = fakedriver.random.randint
            delay = self.power_delay
            fakedriver.random.randint = lambda _a, _b: delay  # type: ignore[assignment]
        app = emulator_main.app
        app.configure(
            extra_config={
                "SUSHY_EMULATOR_FAKE_DRIVER": True,
                "SUSHY_EMULATOR_STATE_DIR": str(tmp / "state"),
                "SUSHY_EMULATOR_AUTH_FILE": str(htpasswd),
                "SUSHY_EMULATOR_FEATURE_SET": "full",
                "SUSHY_EMULATOR_FAKE_SYSTEMS": [
                    {
                        "uuid": SYSTEM_UUID,
                        "name": "System.Embedded.1",
                        "power_state": self.power_state,
                        "nics": [{"mac": "00:5c:52:31:3a:9c", "ip": "127.0.0.2"}],
                    }
                ],
            }
        )
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self._server = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=context)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"https://127.0.0.1:{self._server.server_port}"
        self.ca_path = str(cert)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._saved_randint is not None:
            from sushy_tools.emulator.resources.systems import fakedriver

            fakedriver.random.randint = self._saved_randint
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> SushyToolsBmc:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def module_args(self) -> dict[str, Any]:
        return {"bmc_url": self.url, "username": USERNAME, "password": PASSWORD, "ca_cert": self.ca_path}
