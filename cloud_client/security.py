"""How the cloud is reached, in the operator's words: verified TLS, TLS without verification,
or plain HTTP — what `status` shows, what start-up warns about, what the config refuses."""

from __future__ import annotations

import ipaddress
from typing import Literal
from urllib.parse import urlsplit

TlsMode = Literal["verified", "NOT verified", "plain http"]


def checked_url(base_url: str) -> str:
    """The cloud URL, or ValueError for one httpx would refuse only at the first request (a
    port out of range or not a number, no host): a start with it exits 2, naming the key."""
    try:
        parts = urlsplit(base_url)
        _ = parts.port  # raises for a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"bad cloud URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("bad cloud URL: http(s)://host[:port][/path] expected")
    return base_url


def host_of(base_url: str) -> str:
    return urlsplit(base_url).hostname or ""


def is_loopback(host: str) -> bool:
    """A host whose traffic never leaves this machine (a name is loopback only if it is
    `localhost`: anything else resolves where DNS says)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_mode(base_url: str, verify_tls: bool) -> TlsMode:
    if urlsplit(base_url).scheme != "https":
        return "plain http"
    return "verified" if verify_tls else "NOT verified"


def clear_text_token(base_url: str, *, has_token: bool) -> bool:
    """A bearer token would cross the network unencrypted."""
    host = host_of(base_url)
    return has_token and tls_mode(base_url, True) == "plain http" and not is_loopback(host)


def warnings(
    base_url: str, *, verify_tls: bool, has_token: bool, allow_insecure: bool
) -> list[str]:
    """One line per way the cloud's traffic can be read or forged on the way; empty when
    it cannot (verified TLS, or plain HTTP that stays on this machine)."""
    host = host_of(base_url)
    mode = tls_mode(base_url, verify_tls)
    found = []
    if mode == "NOT verified":
        found.append(
            f"cloud TLS certificate NOT verified (cloud.verify_tls = false): anyone on the "
            f"path can pose as the planner at {host}"
        )
    elif mode == "plain http" and not is_loopback(host):
        what = "the cloud token and every turn" if has_token else "every turn and plan"
        found.append(f"cloud over plain http to {host}: {what} travel in clear text")
    if allow_insecure:
        found.append("cloud.allow_insecure = true: a token may be sent over plain http")
    return found
