"""Label selectors are parsed client-side, so a malformed one names the option, not the server's 400."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._kube import selector
from ansible_collections.metalplane.inference.plugins.module_utils._kube.runners import label_selector

VALID = [
    "app=x",
    "app==x",
    "app!=x",
    "app",
    "!app",
    "app=",  # an empty value is a value
    "tier in (a,b)",
    "tier notin (a,b)",
    "tier in (a)",
    "tier in (a,)",  # as the server: a trailing ',' adds the empty value
    "tier in(a,b)",
    "app=x,tier in (a,b),!legacy,gpu",
    "  app = x , tier  in  ( a , b )  ",
    "modelplane.ai/pool=gpu",
    "nvidia.com/gpu.present=true",
    "kubernetes.io/hostname=node-0.example",
    "a-b_c.d=E-f_g.h",
    "k=" + "v" * 63,
    "k" * 63 + "=v",
    "gpus>4",
    "gpus<-1",
    "in=x",  # Values mode: 'in' is a value here (as a key the server rejects it; never stricter)
    "app=in",
    "",
    "   ",
]

INVALID = [
    ("app=x,", "the selector ends with ','"),
    (",app=x", "expected a label key but found ','"),
    ("app=x,,b", "empty term between ','"),
    ("app=x y", "expected ',' or the end, found 'y'"),
    ("app=a=b", "expected ',' or the end, found '='"),
    ("app=(x)", "expected a value after 'app=' but found '('"),
    ("app = !x", "expected a value after 'app=' but found '!'"),
    ("tier in a,b", "expected '(' after 'tier in'"),
    ("tier in (a,b", "missing ')' after the values of 'tier in'"),
    ("tier in ()", "'tier in ()' has an empty value set"),
    ("tier notin (a b)", "expected ',' or ')' after 'a' in the values of 'tier notin', found 'b'"),
    ("tier in (a,(b))", "unexpected '(' in the values of 'tier in'"),
    ("tier in (a,b/c)", "label value 'b/c' of 'tier' is not valid"),
    ("tier is (a,b)", "expected an operator (=, ==, !=, in, notin, >, <), ',' or the end after 'tier', found 'is'"),
    ("!app=x", "'!app' (does not exist) takes no operator or value, found '='"),
    ("!", "expected a label key after ! but found the end"),
    ("!!app", "expected a label key after ! but found '!'"),
    ("=x", "expected a label key but found '='"),
    ("app=-x", "label value '-x' of 'app' is not valid"),
    ("app=x_", "label value 'x_' of 'app' is not valid"),
    ("app=" + "v" * 64, "label value"),
    ("k" * 64 + "=v", "label key '" + "k" * 64 + "' is not valid (the name after an optional 'prefix/' must be"),
    ("_app=x", "label key '_app' is not valid"),
    ("app$=x", "label key 'app$' is not valid"),
    ("Example.com/app=x", "label key prefix 'Example.com' is not a DNS subdomain"),
    ("a/b/c=x", "label key 'a/b/c' has more than one '/'"),
    ("/app=x", "label key '/app' has an empty prefix before '/'"),
    ("example.com/=x", "label key 'example.com/' has an empty name"),
    ("gpus>four", "'gpus >' needs an integer value, found 'four'"),
    ("gpus<", "'gpus <' needs an integer value, found the end"),
    ("app=x)", "expected ',' or the end, found ')'"),
]


@pytest.mark.parametrize("text", VALID)
def test_valid_selectors_pass_unchanged(text: str) -> None:
    assert selector.problem(text) is None
    assert selector.check(text, "label_selectors") == text


@pytest.mark.parametrize(("text", "wrong"), INVALID)
def test_invalid_selectors_say_what_is_wrong(text: str, wrong: str) -> None:
    problem = selector.problem(text)
    assert problem is not None
    assert problem.startswith(wrong), problem


@pytest.mark.parametrize("field", ["label_selectors", "node_selector"])
def test_check_names_the_option_the_selector_and_an_example(field: str) -> None:
    with pytest.raises(InputError) as caught:
        selector.check("tier in (a,b", field)
    assert caught.value.field == field
    assert str(caught.value) == (
        f"{field}: missing ')' after the values of 'tier in' in 'tier in (a,b'; expected e.g. 'app=x,tier in (a,b)'"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ([], None),
        ({}, None),
        ("app=x", "app=x"),
        (["app=x", "tier in (a,b)"], "app=x,tier in (a,b)"),
        ({"modelplane.ai/pool": "gpu", "zone": 1}, "modelplane.ai/pool=gpu,zone=1"),
    ],
)
def test_label_selector_forms(value: Any, expected: str | None) -> None:
    assert label_selector(value, "node_selector") == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("pool=gpu,", "node_selector: the selector ends with ',' in 'pool=gpu,'"),
        (["app=x", "tier in a"], "node_selector: expected '(' after 'tier in' in 'app=x,tier in a'"),
        ({"pool": "g p u"}, "node_selector: label value 'g p u' of 'pool' is not valid"),
        ({"Bad Key": "x"}, "node_selector: label key 'Bad Key' is not valid"),
        ({"pool": "gpu", "zone": "a,b"}, "node_selector: label value 'a,b' of 'zone' is not valid"),
        (["app=x", 3], "node_selector: must be a label selector string, a list of terms or a mapping"),
        (7, "node_selector: must be a label selector string"),
    ],
)
def test_label_selector_rejects_each_form_naming_the_option(value: Any, message: str) -> None:
    with pytest.raises(InputError) as caught:
        label_selector(value, "node_selector")
    assert str(caught.value).startswith(message), str(caught.value)
    assert caught.value.field == "node_selector"
