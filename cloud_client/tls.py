"""A TLS failure told as one: why the handshake failed and which certificate was presented,
instead of httpx's bare `ConnectError`."""

from __future__ import annotations

import asyncio
import ssl

from cloud_client.x509 import subject_and_issuer


def ssl_cause(exc: BaseException) -> ssl.SSLError | None:
    """The `ssl` error under an httpx one (httpx and httpcore each chain theirs `from` it)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _reason(err: ssl.SSLError) -> str:
    if isinstance(err, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {err.verify_message}"
    if err.reason:
        return str(err.reason).lower().replace("_", " ")
    return str(err) or type(err).__name__


async def presented_certificate(host: str, port: int, *, timeout_s: float) -> str | None:
    """Subject and issuer of the certificate `host:port` presents, read by a handshake that
    verifies nothing and sends nothing (no request, no token); None when it cannot be had."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, port, ssl=context, server_hostname=host)
    except (OSError, TimeoutError):  # ssl.SSLError is an OSError
        return None
    try:
        tls = writer.get_extra_info("ssl_object")
        der = tls.getpeercert(binary_form=True) if isinstance(tls, ssl.SSLObject) else None
    finally:
        writer.transport.abort()  # no close_notify round trip
    names = subject_and_issuer(der) if der else None
    return f"certificate {names[0]}; issuer {names[1]}" if names else None


async def describe(err: ssl.SSLError, host: str, port: int, *, timeout_s: float) -> str:
    """`tls: certificate verify failed: self-signed certificate (certificate CN=…; issuer
    CN=…) at host:port`."""
    text = f"tls: {_reason(err)}"
    if isinstance(err, ssl.SSLCertVerificationError):
        presented = await presented_certificate(host, port, timeout_s=timeout_s)
        if presented:
            text += f" ({presented})"
    return f"{text} at {host}:{port}"
