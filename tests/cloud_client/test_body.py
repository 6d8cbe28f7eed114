"""The body cap on every endpoint: a larger Content-Length is refused before a byte is read, an
unknown-length body is cut off just past the cap, and the response is closed either way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from cloud_client.client import CloudClient
from cloud_client.errors import CloudBadResponse

CAP = 64 * 1024
PIECE = b" " * 4096


class Endless(httpx.AsyncByteStream):
    """A body that never ends, counting what was pulled from it."""

    def __init__(self) -> None:
        self.pulled = 0
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            self.pulled += len(PIECE)
            yield PIECE

    async def aclose(self) -> None:
        self.closed = True


def answering(response: httpx.Response) -> CloudClient:
    return CloudClient(
        base_url="http://cloud.test",
        max_response_bytes=CAP,
        transport=httpx.MockTransport(lambda _req: response),
    )


@pytest.mark.parametrize("path", ["/v1/a2a/turn", "/v1/a2a/memory/sync", "/v1/a2a/workflow/events"])
def test_a_larger_content_length_is_refused_unread(path: str) -> None:
    body = Endless()
    cloud = answering(httpx.Response(200, headers={"content-length": "400000000"}, stream=body))
    with pytest.raises(CloudBadResponse, match="Content-Length 400000000 bytes is over") as info:
        asyncio.run(cloud.post_json(path, {}, deadline_s=2))
    assert path in str(info.value) and str(CAP) in str(info.value)
    assert body.pulled == 0 and body.closed


def test_an_unknown_length_body_is_cut_off_past_the_cap() -> None:
    body = Endless()
    cloud = answering(httpx.Response(200, stream=body))
    with pytest.raises(CloudBadResponse, match=r"too large: over cloud\.max_response_bytes"):
        asyncio.run(cloud.post_json("/v1/a2a/turn", {}, deadline_s=2))
    assert CAP < body.pulled <= CAP + len(PIECE) and body.closed


def test_a_compressed_body_is_refused_and_identity_asked() -> None:
    seen: list[httpx.Request] = []

    def gzipped(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"\x1f\x8b")

    cloud = CloudClient(base_url="http://cloud.test", transport=httpx.MockTransport(gzipped))
    with pytest.raises(CloudBadResponse, match="content-encoding 'gzip'"):
        asyncio.run(cloud.post_json("/v1/a2a/turn", {}, deadline_s=2))
    assert seen[0].headers["accept-encoding"] == "identity"


def test_a_body_at_the_cap_is_read() -> None:
    body = b'{"a": "' + b"x" * (CAP - 9) + b'"}'
    assert len(body) == CAP
    cloud = answering(httpx.Response(200, content=body))
    status, answer = asyncio.run(cloud.post_json("/v1/a2a/workflow/events", {}, deadline_s=2))
    assert status == 200 and len(answer["a"]) == CAP - 9
