"""A response body read as a stream under a hard cap: a peer that sends 400 MB costs us the cap
and a closed connection, never 400 MB of memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cloud_client.errors import CloudBadResponse

if TYPE_CHECKING:
    import httpx

DEFAULT_MAX_BYTES = 1024 * 1024


def _declared_length(response: httpx.Response) -> int | None:
    value = response.headers.get("content-length", "").strip()
    return int(value) if value.isdigit() else None


async def read_capped(response: httpx.Response, cap: int, path: str) -> bytes:
    """The raw body, at most `cap` bytes. A larger `Content-Length` is refused before a byte
    is read; an unknown-length (chunked) body is cut off as soon as it passes the cap. The
    caller closes the response, which closes the connection when the body was not read to its
    end. We ask for `identity`: a compressed body could grow past any cap once inflated."""
    declared = _declared_length(response)
    if declared is not None and declared > cap:
        raise CloudBadResponse(
            f"{path} answered a body too large: Content-Length {declared} bytes is over "
            f"cloud.max_response_bytes ({cap})"
        )
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise CloudBadResponse(f"{path} answered content-encoding {encoding!r} (asked identity)")
    body = bytearray()
    async for chunk in response.aiter_bytes():  # identity: the bytes as they came
        body += chunk
        if len(body) > cap:
            raise CloudBadResponse(
                f"{path} answered a body too large: over cloud.max_response_bytes ({cap}) "
                f"bytes, stopped reading at {len(body)}"
            )
    return bytes(body)
