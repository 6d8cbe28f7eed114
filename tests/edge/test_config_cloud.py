"""The cloud section's guards: no token over plain http to another host unless allowed, a
warning for every way the cloud's traffic can be read or forged, the body cap's bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloud_client.security import is_loopback
from edge.config.errors import ConfigError
from edge.config.settings import CloudSettings, load_settings

TOKEN = {"A2A_EDGE_CLOUD__TOKEN_FILE": "/etc/a2a-edge/token"}


def settings(tmp_path: Path, text: str = "", **env: str) -> CloudSettings:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return load_settings(path, environ=env).cloud


@pytest.mark.parametrize(
    "url", ["http://planner.example.com", "http://10.0.0.5:8080/api", "http://[fe80::1]:80"]
)
def test_a_token_over_plain_http_to_another_host_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings(tmp_path, **TOKEN, A2A_EDGE_CLOUD__BASE_URL=url)
    assert info.value.key == "cloud.base_url"
    assert "clear text" in str(info.value) and "cloud.allow_insecure = true" in str(info.value)


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("http://127.0.0.1:18080", {}),  # stays on the robot
        ("http://localhost:18080", {}),
        ("http://[::1]:18080", {}),
        ("https://planner.example.com", {}),
        ("http://planner.example.com", {"A2A_EDGE_CLOUD__ALLOW_INSECURE": "true"}),
    ],
)
def test_what_is_accepted_with_a_token(tmp_path: Path, url: str, extra: dict[str, str]) -> None:
    cloud = settings(tmp_path, **TOKEN, **extra, A2A_EDGE_CLOUD__BASE_URL=url)
    assert cloud.base_url == url


def test_plain_http_without_a_token_is_accepted_but_warned(tmp_path: Path) -> None:
    cloud = settings(tmp_path, '[cloud]\nbase_url = "http://10.0.0.5:8080"\n')
    assert cloud.tls_mode == "plain http"
    assert cloud.warnings() == [
        "cloud over plain http to 10.0.0.5: every turn and plan travel in clear text"
    ]


def test_verification_off_from_the_environment_is_warned(tmp_path: Path) -> None:
    cloud = settings(
        tmp_path,
        A2A_EDGE_CLOUD__BASE_URL="https://planner.example.com",
        A2A_EDGE_CLOUD__VERIFY_TLS="false",
    )
    assert cloud.tls_mode == "NOT verified"
    assert cloud.warnings() == [
        "cloud TLS certificate NOT verified (cloud.verify_tls = false): anyone on the path can"
        " pose as the planner at planner.example.com"
    ]


def test_the_defaults_warn_of_nothing(tmp_path: Path) -> None:
    cloud = settings(tmp_path)
    assert (cloud.tls_mode, cloud.warnings(), cloud.max_response_bytes) == (
        "plain http",
        [],
        1024 * 1024,
    )
    https = settings(tmp_path, A2A_EDGE_CLOUD__BASE_URL="https://planner.example.com")
    assert (https.tls_mode, https.warnings()) == ("verified", [])


def test_allowing_insecure_is_warned_even_unused(tmp_path: Path) -> None:
    cloud = settings(tmp_path, "[cloud]\nallow_insecure = true\n")
    assert cloud.warnings() == ["cloud.allow_insecure = true: a token may be sent over plain http"]


@pytest.mark.parametrize("value", ["0", "100", str(512 * 1024 * 1024)])
def test_the_body_cap_is_bounded(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings(tmp_path, A2A_EDGE_CLOUD__MAX_RESPONSE_BYTES=value)
    assert info.value.key == "cloud.max_response_bytes"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("localhost", True),
        ("api.localhost", True),
        ("localhost.example.com", False),
        ("10.0.0.1", False),
        ("", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
