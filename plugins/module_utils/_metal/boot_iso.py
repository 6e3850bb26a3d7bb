# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot_iso module's work: check the inputs, fetch the vendor ISO once, master the host's ISO, publish it.

Why here and not in the module: the module file stays a declaration (options, docs), and this flow is tested
in-process. Order matters: every input is checked before anything is downloaded or written; the vendor ISO is
downloaded once into a cache named by its sha256 and verified; the host's ISO is mastered into a temporary file
and only replaces ``dest`` when its sha256 differs, so a re-run with the same inputs changes nothing and uploads
nothing. ``state=absent`` stops the built-in server and deletes the ISO and the generated host key: the ISO
holds the host's secrets and is only kept while the BMC needs it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError, MetalplaneError

from . import host_settings, hostkeys, iso_image, iso_publish, unattended
from .iso_fat import PYFATFS_IMPORT_ERROR

_SHA256 = re.compile(r"^(?:sha256:)?([0-9a-fA-F]{64})$")
READ_CHUNK = 4 * 1024 * 1024
PUBLISHED_FILE_MODE = 0o640  # the web server's group may read it; others may not (the ISO holds secrets)
# Where downloaded vendor ISOs are kept, named by their sha256 (boot_iso's cache_dir, metal_preflight's iso_cache_dir).
DEFAULT_CACHE_DIR = "~/.cache/metalplane/isos"
# HTTP statuses with which a server refuses HEAD but may still serve GET (RFC 9110 sections 15.5.6 and 15.6.2).
HEAD_REFUSED = (405, 501)


class PublishError(MetalplaneError):
    kind = "publish"


# What OpenSSL says when the server's certificate does not chain to a trusted CA (inside urllib's error).
CERTIFICATE_FAILED = "CERTIFICATE_VERIFY_FAILED"


def parse_checksum(value: Any) -> str:
    """The bare lower-case sha256 of ``sha256:<hex>`` or ``<hex>``; InputError on ``iso_checksum`` otherwise."""
    match = _SHA256.match(str(value or "").strip())
    if not match:
        raise InputError(
            "iso_checksum", "give the vendor ISO's sha256 as 'sha256:<64 hex digits>' (from its SHA256SUMS)"
        )
    return match.group(1).lower()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(READ_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _local_path(url: str) -> Path | None:
    if url.startswith("/"):
        return Path(url)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        return Path(urllib.parse.unquote(parts.path))
    return None


def check_iso_url(url: str) -> None:
    """http(s)://host/..., file://... or an absolute path; InputError on ``iso_url`` otherwise."""
    parts = urllib.parse.urlsplit(url)
    if _local_path(url) is None and (parts.scheme not in {"http", "https"} or not parts.netloc):
        raise InputError("iso_url", f"{url!r} is not an http(s):// or file:// URL or an absolute path")


def fetch_source(module: Any, url: str, sha256: str, cache_dir: Path, *, download: bool) -> tuple[Path | None, bool]:
    """The verified vendor ISO (path, downloaded now?); None in check mode when it is not cached yet."""
    return fetch_verified(
        url,
        sha256,
        cache_dir,
        download=download,
        timeout=module.params["api_timeout"],
        validate_certs=module.params["validate_certs"],
        ca_cert=module.params.get("ca_cert"),
    )


def fetch_verified(
    url: str,
    sha256: str,
    cache_dir: Path,
    *,
    download: bool,
    timeout: int,
    validate_certs: bool,
    ca_cert: str | None,
) -> tuple[Path | None, bool]:
    """``fetch_source`` without a module: a local file is verified in place, a remote one downloaded once into
    ``cache_dir/<sha256>.iso`` and verified before it is renamed there (so the cache holds verified ISOs only)."""
    local = _local_path(url)
    if local is not None:
        if not local.is_file():
            raise InputError("iso_url", f"{local} does not exist on the controller")
        actual = file_sha256(local)
        if actual != sha256:
            raise InputError("iso_checksum", f"{local} has sha256 {actual}, not the expected {sha256}")
        return local, False
    cached = cache_dir / f"{sha256}.iso"
    if cached.is_file():
        return cached, False
    if not download:
        return None, False
    from ansible.module_utils.urls import open_url

    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".download-", dir=cache_dir)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                response = open_url(
                    url,
                    timeout=timeout,
                    validate_certs=validate_certs,
                    ca_path=ca_cert,
                    follow_redirects="safe",
                )
                for chunk in iter(lambda: response.read(READ_CHUNK), b""):
                    digest.update(chunk)
                    out.write(chunk)
            except Exception as exc:  # urllib/ssl/socket errors all mean "could not download"
                raise InputError("iso_url", f"cannot download {url}: {exc}{trust_hint(exc)}") from exc
        if digest.hexdigest() != sha256:
            raise InputError("iso_checksum", f"{url} has sha256 {digest.hexdigest()}, not the expected {sha256}")
        os.replace(tmp, cached)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return cached, True


def source_reachable(url: str, *, timeout: int, validate_certs: bool, ca_cert: str | None) -> None:
    """Ask an http(s) URL for its headers only (a check-mode preflight downloads nothing); InputError on
    ``iso_url`` when it does not answer with a success. A server that refuses HEAD is asked for one byte."""
    from urllib.error import HTTPError

    from ansible.module_utils.urls import open_url

    options: dict[str, Any] = {
        "timeout": timeout,
        "validate_certs": validate_certs,
        "ca_path": ca_cert,
        "follow_redirects": "safe",
    }
    try:
        try:
            open_url(url, method="HEAD", **options).close()
        except HTTPError as exc:
            if exc.code not in HEAD_REFUSED:
                raise
            with open_url(url, headers={"Range": "bytes=0-0"}, **options) as response:
                response.read(1)
    except Exception as exc:  # urllib/ssl/socket errors all mean "could not reach"
        raise InputError("iso_url", f"cannot reach {url}: {exc}{trust_hint(exc)}") from exc


def trust_hint(exc: BaseException) -> str:
    """What to do when the server's certificate is not trusted: name the option that trusts it."""
    if CERTIFICATE_FAILED not in str(exc):
        return ""
    return (
        "; the server's TLS certificate is not trusted: give its CA bundle with ca_cert"
        " (validate_certs: false only for a throwaway lab)"
    )


def _publish_options(params: dict[str, Any]) -> dict[str, Any]:
    publish = dict(params.get("publish") or {})
    mode = publish.get("mode") or "none"
    if mode == "directory":
        if not publish.get("directory") or not publish.get("base_url"):
            raise InputError("publish", "mode=directory needs publish.directory and publish.base_url")
        if not str(publish["base_url"]).startswith(("http://", "https://")):
            raise InputError("publish.base_url", "must be the http(s):// URL of publish.directory as the BMC sees it")
    if mode == "server" and not publish.get("address"):
        raise InputError("publish.address", "mode=server needs the controller address the BMC reaches")
    publish["mode"] = mode
    return publish


def run_boot_iso(module: Any) -> dict[str, Any]:
    params = module.params
    module.require("pycdlib", iso_image.PYCDLIB_IMPORT_ERROR)
    module.require("pyfatfs", PYFATFS_IMPORT_ERROR)
    module.require("cryptography", hostkeys.CRYPTOGRAPHY_IMPORT_ERROR)
    dest = Path(params["dest"]).expanduser()
    if params["state"] == "absent":
        return _absent(module, dest)
    return _present(module, dest)


def _absent(module: Any, dest: Path) -> dict[str, Any]:
    publish = dict(module.params.get("publish") or {})
    targets = [dest, *dest.parent.glob(f"{dest.name}.gen*.ssh_host_ed25519_key")]
    if publish.get("directory"):
        targets.append(Path(publish["directory"]).expanduser() / dest.name)
    server = iso_publish.running(dest)
    existing = [p for p in targets if p.exists()]
    changed = bool(existing) or server is not None
    if not module.check_mode:
        iso_publish.stop(dest)
        for path in existing:
            path.unlink()
    return {
        "changed": changed,
        "path": str(dest),
        "removed": [str(p) for p in existing],
        "server_stopped": server is not None,
    }


def _present(module: Any, dest: Path) -> dict[str, Any]:
    params = module.params
    # 1. Every input, before anything is downloaded or written.
    settings = host_settings.host_settings(params)
    sha256 = parse_checksum(params.get("iso_checksum"))
    url = str(params.get("iso_url") or "")
    check_iso_url(url)
    publish = _publish_options(params)
    if params.get("ssh_host_key"):
        host_key = hostkeys.parse_host_key(params["ssh_host_key"], f"root@{settings.hostname}")
        key_generated = False
    else:
        host_key = None
    cache_dir = Path(params.get("cache_dir") or DEFAULT_CACHE_DIR).expanduser()

    # 2. The vendor ISO, verified.
    source, downloaded = fetch_source(module, url, sha256, cache_dir, download=not module.check_mode)
    if host_key is None:
        host_key, key_generated = hostkeys.kept_or_new_host_key(
            dest, settings.generation, f"root@{settings.hostname}", write=not module.check_mode
        )
    module.log_secret(host_key.private)
    result: dict[str, Any] = {
        "path": str(dest),
        "ssh_host_public_key": host_key.public,
        "ssh_host_key_generated": key_generated,
        "known_hosts_line": f"{settings.network.interface.ip} {' '.join(host_key.public.split()[:2])}",
        "source": {"sha256": sha256, "path": str(source) if source else None, "downloaded": downloaded},
    }
    if source is None:  # check mode, nothing cached: a real run would download and build
        return {**result, "changed": True, "msg": "the vendor ISO is not cached yet; a real run downloads and builds"}

    # 3. Master into a temporary file; replace dest only when the bytes differ.
    volume_id = iso_image.volume_id(source)
    rendered = unattended.render(settings, host_key, volume_id)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        os.chmod(tmp, 0o600)
        build = iso_image.build(source, tmp, rendered.files, rendered.kernel_edit)
        new_sha = file_sha256(tmp)
        old_sha = file_sha256(dest) if dest.is_file() else None
        changed = new_sha != old_sha
        if changed and not module.check_mode:
            os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    result.update(
        changed=changed or (key_generated and not module.check_mode),
        sha256=new_sha,
        size=dest.stat().st_size if dest.is_file() else None,
        volume_id=build.volume_id,
        boot_paths=[p.to_result() for p in build.boot_paths],
        edited=build.edited,
        added=build.added,
        config=rendered.config_path,
        hybrid=build.hybrid,
    )
    if module.check_mode:
        return result
    published = _publish(dest, publish, changed)
    publish_changed = published.pop("changed")
    result.update(published, changed=result["changed"] or publish_changed)
    return result


def _publish(dest: Path, publish: dict[str, Any], iso_changed: bool) -> dict[str, Any]:
    mode = publish["mode"]
    if mode == "none":
        return {"changed": False, "url": None}
    if mode == "directory":
        directory = Path(publish["directory"]).expanduser()
        target = directory / dest.name
        changed = iso_changed or not target.is_file() or file_sha256(target) != file_sha256(dest)
        if changed:
            directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=directory)
            os.close(fd)
            try:
                shutil.copyfile(dest, tmp)
                os.chmod(tmp, PUBLISHED_FILE_MODE)
                os.replace(tmp, target)
            finally:
                Path(tmp).unlink(missing_ok=True)
        url = str(publish["base_url"]).rstrip("/") + "/" + urllib.parse.quote(dest.name)
        return {"changed": changed, "url": url, "published": str(target)}
    address, port = str(publish["address"]), int(publish.get("port") or 8080)
    lifetime = int(publish.get("lifetime") or 7200)
    record = iso_publish.running(dest)
    if record is not None and record.get("address") == address and int(record.get("port", 0)) == port:
        return {"changed": False, "url": record["url"], "server": _server_result(record)}
    iso_publish.stop(dest)
    try:
        record = iso_publish.start(dest, address, port, lifetime)
    except OSError as exc:
        with contextlib.suppress(OSError):
            iso_publish.stop(dest)
        raise PublishError(f"publish: cannot serve {dest.name} on {address}:{port}: {exc}") from exc
    return {"changed": True, "url": record["url"], "server": _server_result(record)}


def _server_result(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in ("pid", "address", "port", "lifetime") if k in record}
