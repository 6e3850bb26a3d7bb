# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Client-side syntax check of Kubernetes label selectors.

Why: a malformed selector otherwise reaches the API server, which answers
``HTTP 400: unable to parse requirement: ...`` without naming the module option it came from.
``check`` follows the grammar and the key/value rules of Kubernetes' own parser
(``k8s.io/apimachinery/pkg/labels``, ``Parse``) and raises ``InputError(field, ...)`` first::

    selector    ::= requirement ("," requirement)*
    requirement ::= ["!"] KEY [ ("=" | "==" | "!=") VALUE | ("in" | "notin") "(" VALUE ("," VALUE)* ")"
                                | (">" | "<") INTEGER ]

Whitespace between tokens is ignored. A KEY is a qualified name (an optional lowercase DNS
subdomain prefix and ``/``, then a name of up to 63 characters); a VALUE is empty or a name of up
to 63 characters. It is stricter than nothing and never stricter than the server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

EXAMPLE = "app=x,tier in (a,b)"

_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_SPECIAL = "=!(),<>"
# Two-character operators first: the lexer reads the longest symbol.
_SYMBOLS = ("==", "!=", "=", "!", "(", ")", ",", "<", ">")
_EQUALITY = ("=", "==", "!=")
_SET = ("in", "notin")
_NAME_RULE = "up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"


def _tokens(text: str) -> list[str]:
    """Kubernetes' lexer: symbols, and identifiers (runs of anything else); whitespace separates."""
    out: list[str] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char.isspace():
            pos += 1
            continue
        symbol = next((s for s in _SYMBOLS if text.startswith(s, pos)), None)
        if symbol is not None:
            out.append(symbol)
            pos += len(symbol)
            continue
        end = pos
        while end < len(text) and not text[end].isspace() and text[end] not in _SPECIAL:
            end += 1
        out.append(text[pos:end])
        pos = end
    return out


def _identifier(token: str | None) -> bool:
    return token is not None and token not in _SYMBOLS


def key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label key, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return f"label key {key!r} has an empty prefix before '/'"
        if "/" in prefix:
            return f"label key {key!r} has more than one '/'"
        if len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix):
            return (
                f"label key prefix {prefix!r} is not a DNS subdomain "
                "(lowercase letters, digits, '-' and '.', up to 253 characters)"
            )
    if not name:
        return f"label key {key!r} has an empty name"
    if len(name) > 63 or not _NAME.match(name):
        return f"label key {key!r} is not valid (the name after an optional 'prefix/' must be {_NAME_RULE})"
    return None


def value_problem(value: str, key: str) -> str | None:
    """Why ``value`` is not a valid label value for ``key``, or None (empty values are valid)."""
    if value and (len(value) > 63 or not _NAME.match(value)):
        return f"label value {value!r} of {key!r} is not valid (empty, or {_NAME_RULE})"
    return None


class _Parser:
    """One pass over the tokens; each method returns what is wrong, or None."""

    def __init__(self, selector: str) -> None:
        self.tokens = _tokens(selector)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def found(self) -> str:
        token = self.peek()
        return "the end" if token is None else repr(token)

    def selector(self) -> str | None:
        if not self.tokens:
            return None
        while True:
            bad = self.requirement()
            if bad:
                return bad
            token = self.peek()
            if token is None:
                return None
            if token != ",":
                return f"expected ',' or the end, found {token!r}"
            self.pos += 1
            if self.peek() is None:
                return "the selector ends with ','"
            if self.peek() == ",":
                return "empty term between ','"

    def requirement(self) -> str | None:
        negated = self.peek() == "!"
        if negated:
            self.pos += 1
        key = self.peek()
        if not _identifier(key):
            return f"expected a label key{' after !' if negated else ''} but found {self.found()}"
        key = str(key)
        self.pos += 1
        bad = key_problem(key)
        if bad:
            return bad
        operator = self.peek()
        if operator in (None, ","):
            return None
        if negated:
            return f"'!{key}' (does not exist) takes no operator or value, found {operator!r}"
        self.pos += 1
        return self.restriction(key, str(operator))

    def restriction(self, key: str, operator: str) -> str | None:
        if operator in _EQUALITY:
            return self.exact_value(key, operator)
        if operator in (">", "<"):
            value = self.peek()
            if not _identifier(value) or not _INTEGER.match(str(value)):
                return f"'{key} {operator}' needs an integer value, found {self.found()}"
            self.pos += 1
            return None
        if operator in _SET:
            return self.value_set(key, operator)
        return f"expected an operator (=, ==, !=, in, notin, >, <), ',' or the end after {key!r}, found {operator!r}"

    def exact_value(self, key: str, operator: str) -> str | None:
        value = self.peek()
        if value in (None, ","):
            return None  # an empty value
        if not _identifier(value):
            return f"expected a value after '{key}{operator}' but found {value!r}"
        self.pos += 1
        return value_problem(str(value), key)

    def value_set(self, key: str, operator: str) -> str | None:
        if self.peek() != "(":
            return f"expected '(' after '{key} {operator}'"
        self.pos += 1
        count = 0
        while True:
            item = self.peek()
            if item is None:
                return f"missing ')' after the values of '{key} {operator}'"
            self.pos += 1
            if item == ")":
                return None if count else f"'{key} {operator} ()' has an empty value set"
            count += 1  # ',' stands for an empty value, as on the server
            if item == ",":
                continue
            if not _identifier(item):
                return f"unexpected {item!r} in the values of '{key} {operator}'"
            bad = value_problem(item, key)
            if bad:
                return bad
            following = self.peek()
            if following == ",":
                self.pos += 1
                if self.peek() == ")":
                    count += 1  # a trailing ',' adds the empty value
            elif following not in (None, ")"):  # None: the loop says ')' is missing
                return f"expected ',' or ')' after {item!r} in the values of '{key} {operator}', found {following!r}"


def problem(selector: str) -> str | None:
    """What is wrong with ``selector`` (the first thing found), or None when the server would parse it."""
    return _Parser(selector).selector()


def check(selector: str, field: str) -> str:
    """``selector`` unchanged when the server would parse it; else InputError naming ``field``."""
    bad = problem(selector)
    if bad:
        raise InputError(field, f"{bad} in {selector!r}; expected e.g. {EXAMPLE!r}")
    return selector


def from_mapping(labels: Mapping[Any, Any], field: str) -> str:
    """``k1=v1,k2=v2`` from a ``{label: value}`` mapping, each key and value checked on its own."""
    terms = []
    for raw_key, raw_value in labels.items():
        key, value = str(raw_key), str(raw_value)
        bad = key_problem(key) or value_problem(value, key)
        if bad:
            raise InputError(field, f"{bad} in the mapping {dict(labels)!r}; expected e.g. {{'app': 'x'}}")
        terms.append(f"{key}={value}")
    return ",".join(terms)
