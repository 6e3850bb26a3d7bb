"""sushy, vultr-python and requests internals are reached only from the two adapter files.

Why: a library's private names (``Connector._op``, ``Vultr._req``, ``Sushy._auth``...) can move in
any release. ``_redfish/sushy_adapter.py`` and ``_vultr/vultr_adapter.py`` hold every such access,
each checked against the installed library by its own test; this AST scan of ``plugins/`` fails,
naming file:line, when private library access appears anywhere else.

What counts as a library's private name is read from the installed libraries' sources (a ``_name``
method, class attribute or ``self._name`` assignment of any of their classes, or a module-level
``_name``), so the scan follows new releases. It cannot report our own private members:

* ``self._x``/``cls._x`` in our own classes is never looked at; in a class derived from a library
  class it is reported only when ``_x`` is a private member of that library base (the MRO is read
  at run time), e.g. ``self._session`` or overriding ``_req``;
* ``obj._x`` on any other receiver is reported when ``_x`` is private to a library and to none of
  our classes; a name private to both (today e.g. ``_conn``, ``_auth``) is reported only on a
  receiver that holds a library object in this collection (``LIBRARY_HOLDERS``: ``self.root._auth``
  is sushy's, ``client._conn`` is ours).

Only files that can hold such objects are scanned: those importing one of the libraries or the
``_redfish``/``_vultr`` packages (a plugin handling Ansible's own objects is not concerned).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[4]
PLUGINS = ROOT / "plugins"
COLLECTION = "ansible_collections.metalplane.inference"
# The libraries whose internals the adapters confine (top-level import names).
LIBRARIES = ("sushy", "vultr", "requests")
# The only files allowed to touch them; each has its own contract test against the installed library.
ADAPTERS = frozenset(
    {
        "plugins/module_utils/_redfish/sushy_adapter.py",
        "plugins/module_utils/_vultr/vultr_adapter.py",
    }
)
# Packages whose objects are library objects (a quirk gets sushy resources without importing sushy).
PLATFORM_PACKAGES = ("_redfish", "_vultr")
# Names under which this collection keeps library objects (attributes, variables, parameters): a private
# name that both a library and one of our classes use is the library's on these receivers.
LIBRARY_HOLDERS = frozenset(
    {
        "root",  # sushy.Sushy
        "conn",
        "_conn",
        "connector",  # sushy Connector
        "auth",
        "_auth",  # sushy auth objects
        "system",
        "_system",
        "manager",
        "_manager",
        "extension",
        "oem",  # sushy resources
        "session",
        "http_session",
        "response",  # requests objects
    }
)
ATTR_FUNCTIONS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_library(module: str) -> bool:
    return module.split(".", maxsplit=1)[0] in LIBRARIES


@cache
def library_private_names() -> frozenset[str]:
    """Every private name the installed libraries define: class members, ``self._x``, module ``_x``."""
    names: set[str] = set()
    for library in LIBRARIES:
        package = Path(importlib.import_module(library).__file__ or "").parent
        for path in package.rglob("*.py"):
            if "tests" in path.relative_to(package).parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names |= _defined_private_names(tree, module_level=True)
    return frozenset(names)


def _defined_private_names(tree: ast.AST, *, module_level: bool = False) -> set[str]:
    """Private names ``tree`` defines: defs, class attributes, ``self._x`` stores (and module-level names)."""
    names: set[str] = set()
    scopes = [tree] if module_level else []
    scopes += [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    for scope in scopes:
        for node in getattr(scope, "body", []):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and _private(node.name):
                names.add(node.name)
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names |= {t.id for t in targets if isinstance(t, ast.Name) and _private(t.id)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names |= {
                n.attr
                for n in ast.walk(node)
                if isinstance(n, ast.Attribute)
                and isinstance(n.ctx, ast.Store)
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
                and _private(n.attr)
            }
    return names


@cache
def _class_private_names(klass: type) -> frozenset[str]:
    """Private members of one library class: its namespace plus the ``self._x`` its methods assign."""
    names = {name for name in vars(klass) if _private(name)}
    try:
        source = textwrap.dedent(inspect.getsource(klass))
    except (OSError, TypeError):
        return frozenset(names)
    return frozenset(names | _defined_private_names(ast.parse(source)))


def library_bases_private_names(klass: Any) -> frozenset[str]:
    """Private members ``klass`` inherits from library classes (empty for a class of ours only)."""
    if not isinstance(klass, type):
        return frozenset()
    names: set[str] = set()
    for base in klass.__mro__[1:]:
        if _is_library(base.__module__):
            names |= _class_private_names(base)
    return frozenset(names)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.code} ({self.why})"


def _receiver_name(node: ast.expr) -> str | None:
    """The last name of a receiver: ``self.root`` -> ``root``, ``conn`` -> ``conn``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _is_super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _accesses(tree: ast.AST) -> Iterator[tuple[ast.AST, ast.expr, str]]:
    """``(node, receiver, name)`` for ``x.name`` and ``getattr(x, "name")``-style accesses."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            yield node, node.value, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ATTR_FUNCTIONS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            yield node, node.args[0], node.args[1].value


def scan(path: str, source: str, namespace: Mapping[str, Any], ours: frozenset[str]) -> list[Finding]:
    """Library-internal accesses in one file (see the module docstring for the rules)."""
    tree = ast.parse(source)
    lib = library_private_names()
    findings: list[Finding] = []

    def add(node: ast.AST, why: str) -> None:
        code = f"def {node.name}" if isinstance(node, ast.FunctionDef) else ast.unparse(node)
        findings.append(Finding(path, getattr(node, "lineno", 0), code, why))

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and _is_library(node.module):
            for alias in node.names:
                if _private(alias.name):
                    add(node, f"imports {node.module}.{alias.name}, private to {node.module.split('.')[0]}")

    inherited: dict[int, frozenset[str]] = {}  # id(node) -> library-private names of its enclosing class
    for cls_node in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        base_names = library_bases_private_names(namespace.get(cls_node.name))
        if not base_names:
            continue
        for node in ast.walk(cls_node):
            inherited[id(node)] = base_names
            if isinstance(node, ast.FunctionDef) and node.name in base_names:
                add(node, f"{cls_node.name} overrides {node.name}, private to its library base")

    for node, receiver, name in _accesses(tree):
        if name == "__new__" and not (_is_self(receiver) or _is_super(receiver)):
            add(node, "builds an object without its constructor")
            continue
        if not _private(name):
            continue
        if _is_self(receiver) or _is_super(receiver):
            if name in inherited.get(id(node), ()):
                add(node, f"{name} is private to the library base class")
            continue
        if name not in lib:
            continue
        if name not in ours:
            add(node, f"{name} is private to {'/'.join(LIBRARIES)}")
        elif _receiver_name(receiver) in LIBRARY_HOLDERS:
            add(node, f"{name} on {_receiver_name(receiver)}, which holds a library object here")
    return sorted(findings, key=lambda f: f.line)


def _module_name(path: Path) -> str:
    return ".".join((COLLECTION, *path.relative_to(ROOT).with_suffix("").parts))


def _in_scope(tree: ast.AST) -> bool:
    """Whether a file imports a library or a platform package whose objects are library objects."""
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
            if node.level and not node.module:  # from . import x: the package it sits in decides
                modules = [alias.name for alias in node.names]
        for module in modules:
            if _is_library(module) or any(part in PLATFORM_PACKAGES for part in module.split(".")):
                return True
    return False


@cache
def plugin_files() -> tuple[Path, ...]:
    return tuple(sorted(PLUGINS.rglob("*.py")))


@cache
def our_private_names() -> frozenset[str]:
    """Private names our own classes define (classes derived from a library class excluded)."""
    names: set[str] = set()
    for path in plugin_files():
        if str(path.relative_to(ROOT)) in ADAPTERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        namespace = vars(importlib.import_module(_module_name(path))) if _in_scope(tree) else {}
        for cls_node in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            if not library_bases_private_names(namespace.get(cls_node.name)):
                names |= _defined_private_names(ast.Module(body=[cls_node], type_ignores=[]))
    return frozenset(names)


def test_the_adapters_exist() -> None:
    """The scan exempts these files: a renamed adapter must be renamed here too."""
    missing = sorted(a for a in ADAPTERS if not (ROOT / a).is_file())
    assert not missing, f"adapter files missing (update ADAPTERS): {missing}"


def test_no_library_internals_outside_the_adapters() -> None:
    ours = our_private_names()
    findings: list[Finding] = []
    scanned = 0
    for path in plugin_files():
        relative = str(path.relative_to(ROOT))
        source = path.read_text(encoding="utf-8")
        if relative in ADAPTERS or not _in_scope(ast.parse(source)):
            continue
        scanned += 1
        findings += scan(relative, source, vars(importlib.import_module(_module_name(path))), ours)
    assert scanned > 10, f"only {scanned} files in scope: the scope rule broke"
    assert not findings, (
        "sushy/vultr-python/requests internals outside the adapters (move the access into "
        "_redfish/sushy_adapter.py or _vultr/vultr_adapter.py, or use a public API):\n"
        + "\n".join(str(f) for f in findings)
    )


SYNTHETIC = """\
import sushy
from sushy import connector as sushy_connector
from sushy.connector import _RETRYABLE_EXCEPTIONS
from sushy.resources.system import system as sushy_system
from vultr import Vultr


class Conn(sushy_connector.Connector):
    def _op(self, method, path=""):
        return super()._op(method, path)

    def basic(self):
        return self._session.auth is not None


class Client(Vultr):
    def _path(self, url):
        return url

    def call(self, url):
        return self._req("get", self._path(url))


class Ours:
    def __init__(self, conn, root):
        self._conn = conn
        self._auth = None
        self.root = root

    def drop(self, client):
        self.root._auth = None
        client._conn.close()
        self._conn.close()
        return getattr(self._conn, "_session")

    def system(self, body):
        return sushy_system.System.__new__(sushy_system.System)
"""


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (3, "from sushy.connector import _RETRYABLE_EXCEPTIONS"),  # a private name imported
        (9, "def _op"),  # overriding Connector._op
        (10, "super()._op"),
        (13, "self._session"),  # the library base's instance attribute
        (21, "self._req"),  # vultr-python's private transport
        (31, "self.root._auth"),  # private to sushy and to Ours: root holds a sushy object
        (34, "getattr(self._conn, '_session')"),
        (37, "sushy_system.System.__new__"),
    ],
)
def test_the_scan_reports_library_internals(line: int, code: str) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(SYNTHETIC, "synthetic.py", "exec"), namespace)
    findings = scan("synthetic.py", SYNTHETIC, namespace, frozenset({"_conn", "_auth", "_path"}))
    at_line = [f for f in findings if f.line == line]
    assert at_line, f"nothing reported at synthetic.py:{line}; got {[str(f) for f in findings]}"
    assert any(f.code == code for f in at_line), [str(f) for f in at_line]
    assert all(str(f).startswith(f"synthetic.py:{f.line}: ") for f in findings)


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (21, "self._path"),  # ours, in a Vultr subclass: vultr-python has no _path
        (26, "self._conn"),  # our own class
        (32, "client._conn"),  # private to sushy and to Ours, on a receiver of ours
        (33, "self._conn"),  # self: never looked at in our own classes
    ],
)
def test_the_scan_leaves_our_own_private_members_alone(line: int, code: str) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(SYNTHETIC, "synthetic.py", "exec"), namespace)
    findings = scan("synthetic.py", SYNTHETIC, namespace, frozenset({"_conn", "_auth", "_path"}))
    wrong = [str(f) for f in findings if f.line == line and f.code == code]
    assert not wrong, wrong
    assert not [str(f) for f in findings if f.line == 17], "def _path in a Vultr subclass is ours"


def test_library_private_names_are_read_from_the_installed_libraries() -> None:
    """The names the adapters use must be among those the scan looks for, or it could never fail."""
    assert {"_op", "_session", "_auth", "_req"} <= library_private_names()
