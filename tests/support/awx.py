"""Launch a job template of ``playbooks/awx/vars/objects.yml`` the way AWX does: through ansible-runner.

Why: no AWX controller runs here, and what AWX puts around ``ansible-playbook`` is small and written down in its
source, so it can be reproduced exactly:

- a credential's injectors (``awx/main/models/credential/__init__.py``, ``CredentialType.inject_credential``) are
  rendered with Jinja2's ``ImmutableSandboxedEnvironment`` over the credential's non-empty inputs; each ``file``
  injector becomes a 0600 file in the private data directory's ``env/``, named to the other injectors by
  ``tower.filename`` (or ``tower.filename.<label>`` for ``template.<label>``); ``env`` injectors become environment
  variables (``ANSIBLE_*`` and AWX's own names are refused); ``extra_vars`` injectors go to a 0400 YAML file passed
  as ``-e @file``;
- survey answers become extra variables (``env/extravars``), checked against the survey first;
- a Vault credential's password is typed at ``--ask-vault-pass``'s prompt (AWX's ``expect_passwords``);
- the job's limit and tags are ansible-playbook's.

ansible-runner, AWX's own engine with its event callback, then runs the playbook: the job events and stdout a job
leaves behind are the ones AWX would store.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .collection import REPO_ROOT

OBJECTS = REPO_ROOT / "playbooks" / "awx" / "vars" / "objects.yml"
# AWX's CredentialType.ENV_BLACKLIST: names AWX sets itself; an injector may not set them, nor ANSIBLE_*.
ENV_RESERVED = frozenset(
    {
        "VIRTUAL_ENV", "PATH", "PYTHONPATH", "PROOT_TMP_DIR", "JOB_ID", "INVENTORY_ID", "INVENTORY_SOURCE_ID",
        "INVENTORY_UPDATE_ID", "AD_HOC_COMMAND_ID", "REST_API_URL", "REST_API_TOKEN", "TOWER_HOST", "AWX_HOST",
        "MAX_EVENT_RES", "CALLBACK_QUEUE", "CALLBACK_CONNECTION", "CACHE", "JOB_CALLBACK_DEBUG",
        "INVENTORY_HOSTVARS", "FACT_QUEUE",
    }
)  # fmt: skip
# AWX's build_safe_env: the job's environment as AWX stores it (job_env) masks variables whose names look secret.
HIDDEN_PASSWORD = "**********"
SECRET_NAME = re.compile(r"API|TOKEN|KEY|SECRET|PASS", re.IGNORECASE)
URL_PASSWORD = re.compile(r"^.*?://[^:]+:(.*?)@.*?$")
# The prompt AWX answers with a Vault credential's password (awx/main/tasks/jobs.py, RunJob.get_password_prompts).
VAULT_PROMPT = r"Vault password:\s*?$"


class _ObjectsLoader(yaml.SafeLoader):
    """objects.yml marks AWX's Jinja ``!unsafe`` for Ansible; to AWX (and here) those are plain strings."""


_ObjectsLoader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def load_objects() -> dict[str, Any]:
    return yaml.load(OBJECTS.read_text(), Loader=_ObjectsLoader)


def credential_type(name: str) -> dict[str, Any]:
    for ctype in load_objects()["awx_credential_types"]:
        if ctype["name"] == name:
            return ctype
    raise KeyError(f"no credential type {name!r} in {OBJECTS}")


def job_template(name: str) -> dict[str, Any]:
    for template in load_objects()["awx_job_templates"]:
        if template["name"] == name:
            return template
    raise KeyError(f"no job template {name!r} in {OBJECTS}")


@dataclass(frozen=True)
class Credential:
    """A credential of one of objects.yml's custom types, with its inputs."""

    type_name: str
    inputs: dict[str, Any]


@dataclass
class Injection:
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def inject(credential: Credential, private_data_dir: Path, into: Injection) -> None:
    """What AWX's ``CredentialType.inject_credential`` does for one credential of a custom type."""
    ctype = credential_type(credential.type_name)
    fields = ctype["inputs"].get("fields", [])
    missing = [name for name in ctype["inputs"].get("required", []) if not credential.inputs.get(name)]
    if missing:
        raise ValueError(f"credential of type {credential.type_name!r} lacks required inputs {missing}")
    namespace: dict[str, Any] = {name: value for name, value in credential.inputs.items() if value != ""}
    for spec in fields:
        if spec.get("type") == "boolean":
            namespace.setdefault(spec["id"], False)
    tower = SimpleNamespace()
    namespace["tower"] = tower
    sandbox = ImmutableSandboxedEnvironment()
    env_dir = private_data_dir / "env"
    env_dir.mkdir(parents=True, exist_ok=True)
    injectors = ctype.get("injectors", {})
    for label, template in injectors.get("file", {}).items():
        handle, name = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(handle, "w") as out:
            out.write(sandbox.from_string(template).render(**namespace))
        path = Path(name)
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)
        into.files.append(path)
        if "." not in label:
            tower.filename = str(path)
        else:
            if not isinstance(getattr(tower, "filename", None), SimpleNamespace):
                tower.filename = SimpleNamespace()
            setattr(tower.filename, label.split(".", 1)[1], str(path))
    for var, template in injectors.get("env", {}).items():
        if var.startswith("ANSIBLE_") or var in ENV_RESERVED:
            raise ValueError(f"credential type {credential.type_name!r} injects {var}, which AWX refuses")
        into.env[var] = sandbox.from_string(template).render(**namespace)
    extra_vars = injectors.get("extra_vars", {})
    if extra_vars:
        handle, name = tempfile.mkstemp(dir=env_dir)
        rendered = {key: sandbox.from_string(value).render(**namespace) for key, value in extra_vars.items()}
        with os.fdopen(handle, "w") as out:
            out.write(yaml.safe_dump(rendered))
        Path(name).chmod(stat.S_IRUSR)
        into.files.append(Path(name))
        into.args += ["-e", f"@{name}"]


def safe_env(env: dict[str, str]) -> dict[str, str]:
    """The environment as AWX stores it with the job (``job_env``), after its ``build_safe_env``."""
    safe = dict(env)
    for name, value in env.items():
        if name == "AWS_ACCESS_KEY_ID":
            continue
        if name.startswith("ANSIBLE_") and not name.startswith(("ANSIBLE_NET", "ANSIBLE_GALAXY_SERVER")):
            continue
        if SECRET_NAME.search(name):
            safe[name] = HIDDEN_PASSWORD
        elif URL_PASSWORD.match(value):
            safe[name] = URL_PASSWORD.sub(HIDDEN_PASSWORD, value)
    return safe


def check_survey(template: dict[str, Any], answers: dict[str, Any]) -> None:
    """AWX refuses a launch whose answers break the survey (required, choices, text length) or that sets
    variables the survey does not ask for (the job templates do not prompt for variables)."""
    spec = template.get("survey", {}).get("spec", [])
    asked = {question["variable"]: question for question in spec}
    unknown = sorted(set(answers) - set(asked))
    if unknown:
        raise ValueError(f"{template['name']}: variables {unknown} are not asked by its survey")
    for variable, question in asked.items():
        if variable not in answers:
            if question.get("required"):
                raise ValueError(f"{template['name']}: survey question {variable!r} is required")
            continue
        value = answers[variable]
        if question["type"] == "multiplechoice" and value not in question["choices"]:
            raise ValueError(f"{template['name']}: {variable}={value!r} is not one of {question['choices']}")
        if question["type"] == "text" and not question.get("min", 0) <= len(value) <= question.get("max", 1024):
            raise ValueError(f"{template['name']}: {variable} has {len(value)} characters, outside the survey's bounds")


@dataclass
class Job:
    """A finished job: what AWX keeps of it (stdout, job events, the masked environment ``job_env``) and what it
    needed while it ran (the private data directory, which AWX deletes afterwards; the runner's ``command``
    artifact there holds the full environment)."""

    name: str
    rc: int
    status: str
    stdout: str
    events: list[dict[str, Any]]
    artifacts: Path
    private_data_dir: Path
    injected_files: list[Path]
    job_env: dict[str, str]

    def leaks(self, secrets: dict[str, str]) -> list[str]:
        """Each secret (by name) found, as is or in base64, in what AWX keeps of the job."""
        kept = {
            path.name: path.read_bytes() for path in [self.artifacts / "stdout", *self.artifacts.glob("job_events/*")]
        }
        kept["job_env"] = json.dumps(self.job_env).encode()
        return [
            f"{name} in {place}"
            for place, text in kept.items()
            for name, secret in secrets.items()
            if secret.encode() in text or base64.b64encode(secret.encode()) in text
        ]

    def task_results(self, task: str) -> list[dict[str, Any]]:
        return [
            event
            for event in self.events
            if event.get("event", "").startswith("runner_on_") and event.get("event_data", {}).get("task") == task
        ]


def launch(
    template: dict[str, Any],
    *,
    inventory: Path,
    private_data_dir: Path,
    credentials: Sequence[Credential] = (),
    survey_answers: dict[str, Any] | None = None,
    limit: str | None = None,
    vault_password: str | None = None,
    env: dict[str, str] | None = None,
    timeout: int = 900,
) -> Job:
    """Run one job template's playbook through ``ansible-runner run`` as AWX would launch it.

    The private data directory is laid out as AWX lays it out (``env/envvars``, ``env/extravars``, ``env/passwords``,
    ``env/cmdline``, the credentials' files) and ansible-runner runs in a process of its own: it starts the playbook
    under a pty (pexpect, for the vault prompt), which a test process with the lab's threads must not fork itself.
    """
    answers = dict(survey_answers or {})
    check_survey(template, answers)
    env_dir = private_data_dir / "env"
    env_dir.mkdir(parents=True, exist_ok=True)
    injection = Injection()
    for credential in credentials:
        inject(credential, private_data_dir, injection)
    args = list(injection.args)
    if template.get("job_tags"):
        args += ["--tags", template["job_tags"]]
    if vault_password is not None:
        args.append("--ask-vault-pass")
        _write_private(env_dir / "passwords", yaml.safe_dump({VAULT_PROMPT: vault_password}))
    _write_private(env_dir / "envvars", yaml.safe_dump(injection.env))
    if answers:
        _write_private(env_dir / "extravars", yaml.safe_dump(answers))
    if args:
        _write_private(env_dir / "cmdline", shlex.join(args))
    ident = "job"
    command = [
        str(Path(sys.executable).with_name("ansible-runner")),
        "run",
        str(private_data_dir),
        "--playbook",
        template["playbook"],
        "--project-dir",
        str(REPO_ROOT),
        "--inventory",
        str(inventory),
        "--ident",
        ident,
        "--quiet",
    ]
    if limit:
        command += ["--limit", limit]
    process_env = {**os.environ, **(env or {})}
    subprocess.run(command, env=process_env, timeout=timeout, check=False, capture_output=True)
    artifacts = private_data_dir / "artifacts" / ident
    events = [json.loads(path.read_text()) for path in sorted((artifacts / "job_events").glob("*.json"))]
    events.sort(key=lambda event: event.get("counter", 0))
    return Job(
        name=template["name"],
        rc=int((artifacts / "rc").read_text()),
        status=(artifacts / "status").read_text().strip(),
        stdout=(artifacts / "stdout").read_text(),
        events=events,
        artifacts=artifacts,
        private_data_dir=private_data_dir,
        injected_files=injection.files,
        job_env=safe_env(injection.env),
    )


def _write_private(path: Path, text: str) -> None:
    """The private data directory's env/ files, owner-only as AWX writes them."""
    path.write_text(text)
    path.chmod(stat.S_IRUSR | stat.S_IWUSR)
