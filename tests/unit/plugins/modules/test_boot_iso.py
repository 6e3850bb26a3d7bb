"""boot_iso through its main(): build, re-run unchanged, publish, clean up, and bad input before any write."""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import sys
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils" / "_metal"))
from metal_support import HOST_KEY, ROOT_HASH, params

from ansible_collections.metalplane.inference.plugins.modules import boot_iso


def _run(args: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with patch_module_args(args), pytest.raises(SystemExit):
        boot_iso.main()
    return json.loads(capsys.readouterr().out)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def el_source(vendor_iso: Callable[[str], Path]) -> Path:
    return vendor_iso("el10")


def _args(source: Path, tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    return {
        **params(),
        "dest": str(tmp_path / "out" / "r730.iso"),
        "iso_url": source.as_uri(),
        "iso_checksum": f"sha256:{_sha(source)}",
        "cache_dir": str(tmp_path / "cache"),
        **overrides,
    }


def _assert_no_secret(result: dict[str, Any]) -> None:
    text = json.dumps(result)
    assert ROOT_HASH not in text
    assert "PRIVATE KEY" not in text


def test_build_then_rerun_is_unchanged(el_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _args(el_source, tmp_path)
    first = _run(args, capsys)
    dest = Path(args["dest"])
    assert first["changed"] is True, first
    assert first["sha256"] == _sha(dest)
    assert first["volume_id"] == "CentOS-Stream-10-BaseOS-x86_64"
    assert first["ssh_host_key_generated"] is True
    assert first["ssh_host_public_key"].startswith("ssh-ed25519 ")
    assert first["known_hosts_line"] == "192.168.120.70 " + " ".join(first["ssh_host_public_key"].split()[:2])
    assert {(p["firmware"], p["where"]) for p in first["boot_paths"]} == {
        ("bios", "iso"),
        ("uefi", "iso"),
        ("uefi", "efi_image"),
    }
    assert first["added"] == ["/ks.cfg"]
    assert dest.stat().st_mode & 0o777 == 0o600
    key_file = dest.with_name("r730.iso.gen3.ssh_host_ed25519_key")
    assert key_file.stat().st_mode & 0o777 == 0o600
    _assert_no_secret(first)

    second = _run(args, capsys)
    assert second["changed"] is False
    assert second["sha256"] == first["sha256"]
    assert second["ssh_host_public_key"] == first["ssh_host_public_key"]
    assert second["ssh_host_key_generated"] is False

    # A new claim generation is a reinstall: a new host key, a new ISO, the old key gone.
    third = _run({**args, "generation": 4}, capsys)
    assert third["changed"] is True
    assert third["ssh_host_public_key"] != first["ssh_host_public_key"]
    assert not key_file.exists()
    assert dest.with_name("r730.iso.gen4.ssh_host_ed25519_key").is_file()


def test_given_host_key_is_used_and_not_stored(
    el_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _args(el_source, tmp_path, ssh_host_key=HOST_KEY.private)
    result = _run(args, capsys)
    assert result["ssh_host_public_key"] == HOST_KEY.public
    assert result["ssh_host_key_generated"] is False
    assert sorted(p.name for p in Path(args["dest"]).parent.iterdir()) == ["r730.iso"]
    _assert_no_secret(result)


def test_check_mode_writes_nothing(el_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _args(el_source, tmp_path, _ansible_check_mode=True)
    result = _run(args, capsys)
    assert result["changed"] is True
    assert "sha256" in result
    assert not Path(args["dest"]).parent.exists() or not any(Path(args["dest"]).parent.iterdir())


def test_download_goes_to_the_cache_once(el_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An http:// source is downloaded into the cache, named by its sha256, and reused."""
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    requests: list[str] = []

    class Counting(Quiet):
        def do_GET(self) -> None:
            requests.append(self.path)
            super().do_GET()

    server = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: Counting(*a, directory=str(el_source.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{el_source.name}"
        args = _args(el_source, tmp_path, iso_url=url)
        first = _run(args, capsys)
        second = _run(args, capsys)
    finally:
        server.shutdown()
        server.server_close()
    sha = _sha(el_source)
    assert first["source"] == {"sha256": sha, "path": str(tmp_path / "cache" / f"{sha}.iso"), "downloaded": True}
    assert second["source"]["downloaded"] is False
    assert second["changed"] is False
    assert requests == [f"/{el_source.name}"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _head(url: str) -> int | None:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=2)
    try:
        connection.request("HEAD", parts.path)
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


def test_publish_with_the_builtin_server_and_remove(
    el_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish = {"mode": "server", "address": "127.0.0.1", "port": _free_port()}
    args = _args(el_source, tmp_path, publish=publish)
    try:
        first = _run(args, capsys)
        assert first["changed"] is True
        assert first["server"]["port"] == publish["port"]
        assert _head(first["url"]) == 200
        again = _run(args, capsys)
        assert again["changed"] is False
        assert again["url"] == first["url"]
    finally:
        removed = _run({"dest": args["dest"], "state": "absent"}, capsys)
    assert removed["changed"] is True
    assert removed["server_stopped"] is True
    assert _head(first["url"]) is None
    assert not any(Path(args["dest"]).parent.iterdir())  # ISO, host key, pid file and log all gone
    assert _run({"dest": args["dest"], "state": "absent"}, capsys)["changed"] is False


def test_publish_into_a_served_directory(el_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    publish = {"mode": "directory", "directory": str(tmp_path / "www"), "base_url": "http://10.0.0.5/isos/"}
    args = _args(el_source, tmp_path, publish=publish)
    first = _run(args, capsys)
    copy = tmp_path / "www" / "r730.iso"
    assert first["url"] == "http://10.0.0.5/isos/r730.iso"
    assert _sha(copy) == first["sha256"]
    assert copy.stat().st_mode & 0o777 == 0o640
    assert _run(args, capsys)["changed"] is False
    removed = _run({"dest": args["dest"], "state": "absent", "publish": publish}, capsys)
    assert str(copy) in removed["removed"]
    assert not copy.exists()


BAD: list[tuple[dict[str, Any], str]] = [
    ({"iso_checksum": "sha256:" + "0" * 64}, "iso_checksum"),
    ({"iso_checksum": "md5:abc"}, "iso_checksum"),
    ({"iso_url": "http://127.0.0.1:9/CentOS.iso"}, "iso_url"),
    ({"iso_url": "ftp://mirror/CentOS.iso"}, "iso_url"),
    ({"iso_url": "/nonexistent/CentOS.iso"}, "iso_url"),
    ({"network": {**params()["network"], "mac": "24:6e:96:0a:1b:zz"}}, "network.mac"),
    ({"network": {**params()["network"], "address": "192.168.120.255/24"}}, "network.address"),
    ({"network": {**params()["network"], "gateway": "192.168.121.1"}}, "network.gateway"),
    ({"root_password_hash": "correct horse battery staple"}, "root_password_hash"),
    ({"disk": {}}, "disk"),
    ({"publish": {"mode": "directory", "directory": "/srv/www"}}, "publish"),
    (
        {"ssh_host_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nnot a key\n-----END OPENSSH PRIVATE KEY-----"},
        "ssh_host_key",
    ),
]


@pytest.mark.parametrize(("overrides", "field"), BAD)
def test_bad_input_fails_before_any_write(
    el_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], overrides: dict[str, Any], field: str
) -> None:
    args = _args(el_source, tmp_path, **overrides)
    result = _run(args, capsys)
    assert result["failed"] is True
    assert result["error"] == {"kind": "input", "field": field}
    assert result["msg"].startswith(f"{field}: ")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    _assert_no_secret(result)
    assert "correct horse" not in json.dumps(result)


def test_unsupported_os_family_is_refused_by_the_spec(
    el_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = _run(_args(el_source, tmp_path, os_family="windows"), capsys)
    assert result["failed"] is True
    assert "os_family" in result["msg"]
    assert not (tmp_path / "out").exists()


def test_argument_spec_matches_the_documentation() -> None:
    import yaml

    documented = yaml.safe_load(boot_iso.DOCUMENTATION)["options"]
    spec = boot_iso.argument_spec()
    assert set(spec) == set(documented)
    for name, option in spec.items():
        doc = documented[name]
        assert option.get("type", "str") == doc.get("type", "str"), name
        assert option.get("default") == doc.get("default"), name
        assert option.get("choices") == doc.get("choices"), name
        for sub, sub_option in option.get("options", {}).items():
            assert sub_option.get("type", "str") == doc["suboptions"][sub].get("type", "str"), (name, sub)
            assert sub_option.get("default") == doc["suboptions"][sub].get("default"), (name, sub)
