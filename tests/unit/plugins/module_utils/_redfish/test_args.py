"""bmc_url validation and the shared connection options."""

from __future__ import annotations

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import (
    connection_params,
    parse_bmc_url,
    redfish_argument_spec,
)


@pytest.mark.parametrize(
    ("url", "base", "prefix"),
    [
        ("https://idrac.example", "https://idrac.example", "/redfish/v1/"),
        ("https://idrac.example:8443/", "https://idrac.example:8443", "/redfish/v1/"),
        ("https://10.0.0.5/redfish/v1", "https://10.0.0.5", "/redfish/v1/"),
        ("http://127.0.0.1:9000/bmc/r730-1", "http://127.0.0.1:9000", "/bmc/r730-1/redfish/v1/"),
        ("https://127.0.0.1:9000/bmc/r730-1/redfish/v1/", "https://127.0.0.1:9000", "/bmc/r730-1/redfish/v1/"),
    ],
)
def test_parse_bmc_url(url: str, base: str, prefix: str) -> None:
    assert parse_bmc_url(url) == (base, prefix)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("idrac.example", "must start with https://"),
        ("ftp://idrac.example", "must start with https://"),
        ("https://", "no host name"),
        ("https://idrac.example/?x=1", "query"),
        ("https://idrac.example:99999", "invalid port"),
    ],
)
def test_parse_bmc_url_rejects(url: str, fragment: str) -> None:
    with pytest.raises(InputError) as info:
        parse_bmc_url(url)
    assert info.value.field == "bmc_url"
    assert fragment in info.value.msg


def _params(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {"bmc_url": "https://bmc", "username": "root", "password": "pw", "validate_certs": True}
    base.update(kw)
    return base


def test_verify_and_ca_cert() -> None:
    assert connection_params(_params()).verify is True
    assert connection_params(_params(ca_cert="/ca.pem")).verify == "/ca.pem"
    assert connection_params(_params(validate_certs=False, ca_cert="/ca.pem")).verify is False
    assert connection_params(_params(api_timeout=5)).timeout == 5
    with pytest.raises(InputError) as info:
        connection_params(_params(api_timeout=0))
    assert info.value.field == "api_timeout"


def test_spec_secrets_and_fallbacks() -> None:
    spec = redfish_argument_spec()
    assert spec["password"]["no_log"] is True
    assert spec["password"]["fallback"][1] == ["REDFISH_PASSWORD"]
    assert spec["username"]["fallback"][1] == ["REDFISH_USERNAME"]
    assert spec["validate_certs"]["default"] is True


@pytest.mark.parametrize(
    ("given", "auth"),
    [
        ({}, "basic"),  # the default: no session on the BMC to exhaust or leak
        ({"auth": None}, "basic"),
        ({"auth": "basic"}, "basic"),
        ({"auth": "session"}, "session"),
    ],
)
def test_auth_mode(given: dict[str, object], auth: str) -> None:
    assert connection_params(_params(**given)).auth == auth


def test_auth_mode_rejects_unknown_and_spec_matches() -> None:
    with pytest.raises(InputError) as info:
        connection_params(_params(auth="token"))
    assert info.value.field == "auth"
    assert redfish_argument_spec()["auth"] == {"type": "str", "default": "basic", "choices": ["basic", "session"]}
