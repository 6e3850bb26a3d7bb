# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``node_packages`` on the node: repositories written, the package manager asked, the plan carried out.

Why a ``NodeIO`` seam: the converge logic (which files change, when to refresh the index, when a missing version
is an error) is tested against a scripted node and against the lab's package shims, without a module process;
``AnsibleNodeIO`` is the one implementation that touches the real node (``run_command``, files, ``fetch_url``).
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Mapping
from typing import Any, Protocol

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError, MetalplaneError
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule

from .args import PROXY_KEYS
from .packages import (
    ABSENT,
    APT,
    BASE_ENV,
    DNF,
    OS_RELEASE_PATHS,
    Change,
    Plan,
    available_query,
    installed_query,
    key_extension,
    key_path,
    missing_message,
    package_family,
    parse_dnf_list,
    parse_dpkg_query,
    parse_madison,
    parse_os_release,
    parse_package_specs,
    parse_repositories,
    parse_rpm_query,
    plan_transaction,
    refresh_command,
    render_repository,
    repository_path,
    transaction_commands,
)

KEY_TIMEOUT = 30  # seconds for one repository key download
FILE_MODE = 0o644  # repository and key files: world-readable, as apt and dnf (running as _apt / root) need
DIR_MODE = 0o755
OUTPUT_TAIL = 2000  # characters of a failed command's output kept in the error


class PackageManagerError(MetalplaneError):
    """The package manager failed on the node (network, lock, a broken dependency): its output says why."""

    kind = "package_manager"


class NodeIO(Protocol):
    """What the converge step needs from the node."""

    def run(self, argv: list[str], env: Mapping[str, str]) -> tuple[int, str, str]: ...

    def read(self, path: str) -> bytes | None: ...

    def write(self, path: str, content: bytes) -> None: ...

    def fetch(self, url: str, env: Mapping[str, str]) -> bytes: ...


def proxy_env(http_proxy: Mapping[str, Any] | None) -> dict[str, str]:
    """The proxy settings as environment variables, lower case (curl, apt) and upper case (others)."""
    env: dict[str, str] = {}
    for key in PROXY_KEYS:
        value = (http_proxy or {}).get(key)
        if value:
            env[key] = str(value)
            env[key.upper()] = str(value)
    return env


def _checked(io: NodeIO, argv: list[str], env: Mapping[str, str], ok: frozenset[int] = frozenset({0})) -> str:
    rc, out, err = io.run(argv, env)
    if rc not in ok:
        raise PackageManagerError(
            f"{' '.join(argv[:3])} failed on the node (rc {rc}): {(err or out).strip()[-OUTPUT_TAIL:]}",
            details={"command": argv, "rc": rc, "stdout": out[-OUTPUT_TAIL:], "stderr": err[-OUTPUT_TAIL:]},
        )
    return out


def query_installed(io: NodeIO, family: str, names: list[str], env: Mapping[str, str]) -> dict[str, str]:
    if not names:
        return {}
    if family == APT:  # dpkg-query exits 1 when a name is unknown to dpkg: that is "not installed"
        return parse_dpkg_query(_checked(io, installed_query(family, names), env, frozenset({0, 1})))
    rc, out, err = io.run(installed_query(family, names), env)
    if "error:" in err:  # rpm exits with the number of packages not installed; real failures say "error:"
        raise PackageManagerError(f"rpm -q failed on the node (rc {rc}): {err.strip()[-OUTPUT_TAIL:]}")
    return parse_rpm_query(out)


def query_offered(io: NodeIO, family: str, names: list[str], env: Mapping[str, str]) -> dict[str, list[str]]:
    if not names:
        return {}
    if family == APT:
        return parse_madison(_checked(io, available_query(family, names), env))
    # dnf list exits 1 with "Error: No matching Packages to list" when none of the names is offered.
    rc, out, err = io.run(available_query(family, names), env)
    if rc not in (0, 1) or (rc == 1 and "No matching Packages" not in err + out):
        raise PackageManagerError(f"dnf list failed on the node (rc {rc}): {(err or out).strip()[-OUTPUT_TAIL:]}")
    return parse_dnf_list(out)


def _read_os_release(io: NodeIO) -> dict[str, str]:
    for path in OS_RELEASE_PATHS:
        content = io.read(path)
        if content is not None:
            return parse_os_release(content.decode("utf-8", "replace"))
    return {}


def converge(io: NodeIO, params: Mapping[str, Any], check_mode: bool) -> tuple[dict[str, Any], list[str]]:  # noqa: PLR0912, PLR0915
    """The module's whole run against ``io``; returns the result and the warnings."""
    warnings: list[str] = []
    specs = parse_package_specs(params.get("packages") or [])
    family = package_family(_read_os_release(io))
    repositories = parse_repositories(params.get("repositories") or [], family)
    state = params.get("state") or "present"
    env = {**BASE_ENV, **proxy_env(params.get("http_proxy"))}

    # 1. Repositories and their keys, written only when their content differs.
    repo_results: list[dict[str, Any]] = []
    files_before: dict[str, str | None] = {}
    files_after: dict[str, str | None] = {}
    for index, repo in enumerate(repositories):
        signing_key: str | None = None
        key_changed = False
        if repo.key_url:
            key = io.fetch(repo.key_url, env)
            try:
                extension = key_extension(key)
            except ValueError as exc:
                raise InputError(f"repositories[{index}].key_url", f"{repo.key_url} returned {exc}") from exc
            if family == DNF and extension != "asc":
                raise InputError(
                    f"repositories[{index}].key_url", f"{repo.key_url}: dnf needs an ASCII-armored key (.asc)"
                )
            signing_key = key_path(family, repo.name, extension)
            key_changed = io.read(signing_key) != key
            if key_changed and not check_mode:
                io.write(signing_key, key)
        path = repository_path(family, repo.name)
        content = render_repository(family, repo, signing_key).encode()
        old = io.read(path)
        file_changed = old != content
        if file_changed and not check_mode:
            io.write(path, content)
        files_before[path] = old.decode("utf-8", "replace") if old is not None else None
        files_after[path] = content.decode()
        repo_results.append(
            {"name": repo.name, "path": path, "key_path": signing_key, "changed": file_changed or key_changed}
        )
    repos_changed = any(r["changed"] for r in repo_results)

    # 2. The index: refreshed when asked, or when apt must learn a repository written now (dnf reads new
    #    repositories' metadata on its own).
    refreshed = False
    if (params.get("update_cache") or (repos_changed and family == APT)) and not check_mode:
        _checked(io, refresh_command(family), env)
        refreshed = True

    # 3. What is there, what is offered, the plan.
    names = [s.name for s in specs]
    installed = query_installed(io, family, names, env)
    plan = _plan(io, family, specs, state, installed=installed, env=env)
    if plan.missing and not refreshed and not check_mode and state != ABSENT:
        _checked(io, refresh_command(family), env)  # a stale index is the usual reason: look once more
        refreshed = True
        plan = _plan(io, family, specs, state, installed=installed, env=env)
    if plan.missing:
        if check_mode and repos_changed:
            warnings.append(
                "check mode: the repositories are not written yet, so these versions cannot be looked up: "
                + ", ".join(plan.missing)
            )
            plan = _assume_offered(plan, specs)
        else:
            raise InputError(
                "packages",
                missing_message(plan.missing, [r["name"] for r in repo_results]),
                details={"missing": plan.missing, "family": family},
            )

    # 4. The transaction.
    commands = transaction_commands(family, plan)
    if commands and not check_mode:
        for argv in commands:
            _checked(io, argv, env)
        now = query_installed(io, family, names, env)
        for change in plan.changes:
            if now.get(change.name) != change.after:
                raise PackageManagerError(
                    f"{' '.join(commands[0][:2])} succeeded but {change.name} is "
                    f"{now.get(change.name) or 'not installed'} instead of {change.after or 'removed'}",
                    details={"package": change.name, "expected": change.after, "found": now.get(change.name)},
                )
        plan.after.update({n: now.get(n) for n in names})

    result: dict[str, Any] = {
        "changed": repos_changed or plan.changed,
        "family": family,
        "installed": dict(plan.after),
        "transaction": [{"name": c.name, "before": c.before, "after": c.after, "action": c.kind} for c in plan.changes],
        "repositories": repo_results,
        "cache_updated": refreshed,
        "commands": [shlex.join(argv) for argv in commands],
        "diff": {
            "before": {"packages": dict(plan.before), "repositories": files_before},
            "after": {"packages": dict(plan.after), "repositories": files_after},
        },
    }
    return result, warnings


def _plan(
    io: NodeIO, family: str, specs: list[Any], state: str, *, installed: Mapping[str, str], env: Mapping[str, str]
) -> Plan:
    unsatisfied: list[str] = []
    if state != ABSENT:
        probe = plan_transaction(family, specs, state, installed, {})
        unsatisfied = [s.name for s in specs if str(s) in probe.missing]
    return plan_transaction(family, specs, state, installed, query_offered(io, family, unsatisfied, env))


def _assume_offered(plan: Plan, specs: list[Any]) -> Plan:
    """Check mode before a repository exists: report the missing packages as installs of what was asked."""
    for spec in specs:
        if str(spec) in plan.missing:
            wanted = spec.version or "(newest)"
            current = plan.before.get(spec.name)
            plan.changes.append(Change(spec.name, current, wanted, "install" if current is None else "upgrade"))
            plan.after[spec.name] = wanted
    plan.missing = {}
    return plan


class AnsibleNodeIO:
    """The node itself, through the module: commands by ``run_command``, files directly, keys by ``fetch_url``."""

    def __init__(self, module: MetalplaneModule) -> None:
        self.module = module

    def run(self, argv: list[str], env: Mapping[str, str]) -> tuple[int, str, str]:
        rc, out, err = self.module.ansible.run_command(argv, environ_update=dict(env))
        return int(rc), str(out), str(err)

    def read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def write(self, path: str, content: bytes) -> None:
        directory = os.path.dirname(path)
        os.makedirs(directory, mode=DIR_MODE, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
        try:
            os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, "wb") as handle:
                handle.write(content)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def fetch(self, url: str, env: Mapping[str, str]) -> bytes:
        if url.startswith("file://"):  # a key the site placed on the node (or a mounted medium)
            content = self.read(url[len("file://") :])
            if content is None:
                raise PackageManagerError(f"the repository key {url} does not exist on the node", details={"url": url})
            return content
        from ansible.module_utils.urls import fetch_url

        # fetch_url's proxy handler reads the process environment (urllib's getproxies).
        os.environ.update({k: v for k, v in env.items() if k.lower() in PROXY_KEYS})
        response, info = fetch_url(self.module.ansible, url, timeout=KEY_TIMEOUT)
        if response is None or info.get("status") != 200:
            raise PackageManagerError(
                f"downloading the repository key {url} failed: {info.get('status')} {info.get('msg')}",
                details={"url": url, "status": info.get("status")},
            )
        return bytes(response.read())


def run_node_packages(module: MetalplaneModule) -> dict[str, Any]:
    result, warnings = converge(AnsibleNodeIO(module), module.params, module.check_mode)
    for warning in warnings:
        module.warn(warning)
    if not module.diff_mode:
        result.pop("diff")
    return result
