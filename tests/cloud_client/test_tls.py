"""TLS failures told as TLS failures, against a real TLS server in this process: why the
handshake failed, which certificate was presented, and no retry of what cannot change."""

from __future__ import annotations

import asyncio
import re
import ssl
from pathlib import Path

import pytest

from cloud_client.client import CloudClient
from cloud_client.errors import CloudTransient, CloudUnavailable
from cloud_client.x509 import subject_and_issuer
from tests.e2e.test_tls import make_ca, openssl


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    make_ca(d, "rogue-planner")
    return d


def der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def test_subject_and_issuer_are_read_from_der(pki: Path, tmp_path: Path) -> None:
    assert subject_and_issuer(der(pki / "rogue-planner.crt")) == (
        "CN=rogue-planner",
        "CN=rogue-planner",
    )
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out", "c.pem",
        "-days", "1", "-utf8", "-subj", "/C=KR/O=Acme 로봇/OU=Edge/CN=planner.test", cwd=tmp_path,
    )  # fmt: skip
    subject, _ = subject_and_issuer(der(tmp_path / "c.pem")) or ("", "")
    assert subject == "O=Acme 로봇, OU=Edge, CN=planner.test"
    assert subject_and_issuer(b"\x30\x82\xff\xff not a certificate") is None


async def _answer(
    requests: list[bytes], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()
        return
    requests.append(head)
    length = re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)
    await reader.readexactly(int(length.group(1)) if length else 0)
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    )
    await writer.drain()
    writer.close()


async def _post(pki: Path, *, verify: bool) -> tuple[object, list[bytes], int]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "rogue-planner.crt", pki / "rogue-planner.key")
    requests: list[bytes] = []
    server = await asyncio.start_server(
        lambda r, w: _answer(requests, r, w), "127.0.0.1", 0, ssl=context
    )
    port = server.sockets[0].getsockname()[1]
    cloud = CloudClient(base_url=f"https://127.0.0.1:{port}", token="tok", verify_tls=verify)
    try:
        result: object = await cloud.post_json("/v1/a2a/turn", {}, deadline_s=3)
    except CloudUnavailable as exc:
        result = exc
    finally:
        await cloud.aclose()
        server.close()
    return result, requests, port


def test_a_self_signed_cloud_is_a_tls_failure_naming_the_certificate(pki: Path) -> None:
    result, requests, port = asyncio.run(_post(pki, verify=True))
    assert isinstance(result, CloudUnavailable) and not isinstance(result, CloudTransient)
    assert str(result) == (
        "tls: certificate verify failed: self-signed certificate (certificate"
        f" CN=rogue-planner; issuer CN=rogue-planner) at 127.0.0.1:{port}"
    )
    assert requests == []  # the certificate probe sends nothing, the token never left


def test_without_verification_the_same_cloud_answers(pki: Path) -> None:
    result, requests, _ = asyncio.run(_post(pki, verify=False))
    assert result == (200, {})
    assert len(requests) == 1
