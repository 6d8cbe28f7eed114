"""The planner's HTTP client: one attempt maps httpx outcomes to our errors; the retry policy
and a total deadline wrap it."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from a2a_common import jsonx
from a2a_common.stopwatch import Stopwatch
from cloud_client import security
from cloud_client.body import DEFAULT_MAX_BYTES, read_capped
from cloud_client.errors import (
    CloudBadResponse,
    CloudError,
    CloudRejected,
    CloudTransient,
    CloudUnavailable,
)
from cloud_client.models import BatchAnswer, TurnRequest, TurnResponse
from cloud_client.retry import retrying
from cloud_client.tls import describe, ssl_cause

if TYPE_CHECKING:
    import httpx

TURN_PATH = "/v1/a2a/turn"
BATCH_REFUSED = (400, 404)  # SPEC §3.3: a cloud that does not take the batch form


class CloudClient:
    def __init__(
        self,
        *,
        base_url: str,
        token: str | None = None,
        connect_timeout_s: float = 2.0,
        read_timeout_s: float = 4.0,
        verify_tls: bool = True,
        max_response_bytes: int = DEFAULT_MAX_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
        user_agent: str = "a2a-edge",
    ) -> None:
        headers = {
            "content-type": "application/json",
            "user-agent": user_agent,
            "accept-encoding": "identity",  # the cap counts what we hold (cloud_client.body)
        }
        if token:
            headers["authorization"] = f"Bearer {token}"
        self._options: dict[str, Any] = {
            "base_url": security.checked_url(base_url),
            "headers": headers,
            "verify": verify_tls,
            "transport": transport,
            "follow_redirects": False,
        }
        self._timeouts = (read_timeout_s, connect_timeout_s)
        self._client: httpx.AsyncClient | None = None
        self._urls: dict[str, httpx.URL] = {}  # path -> its URL on the base, merged once
        self._unreachable = False
        self._max_body = max_response_bytes
        self._connect_timeout_s = connect_timeout_s

    @property
    def _http(self) -> httpx.AsyncClient:
        """The HTTP client, built at its first use or by `prepare`: with TLS verification it
        reads and parses the whole CA bundle (~70 ms), which the runtime's READY does not wait
        for (edge/runtime/executor.py prepares it right after)."""
        if self._client is None:
            import httpx  # here, not on the cold path: ~90 ms of imports READY does not wait for

            read_s, connect_s = self._timeouts
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(read_s, connect=connect_s), **self._options
            )
        return self._client

    def prepare(self) -> None:
        """Build the HTTP client now, before the first request needs it."""
        _ = self._http

    @property
    def unreachable(self) -> bool:
        """The last request found no cloud (it may be gone for days)."""
        return self._unreachable

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def _attempt(self, path: str, content: bytes, watch: Stopwatch) -> tuple[int, Any]:
        try:
            status, raw = await self._exchange(path, content)
        finally:
            watch.lap("cloud")
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            if 200 <= status < 300:
                raise CloudBadResponse(f"HTTP {status} body is not JSON") from exc
            body = None
        if status in (200, 201, 409):
            return status, body
        raise CloudRejected(status, body)

    async def _exchange(self, path: str, content: bytes) -> tuple[int, bytes]:
        """Status and body of one POST; leaving the stream closes the response (and the
        connection, when its body was not read to the end)."""
        import httpx  # loaded by `_http` (bound here for the except clauses)

        try:
            async with self._http.stream("POST", self._url(path), content=content) as response:
                status = response.status_code
                if status == 429 or status >= 500:
                    raise CloudTransient(f"HTTP {status} from {path}")
                if 300 <= status < 400:  # not followed: say where it pointed
                    location = response.headers.get("location")
                    raise CloudRejected(status, None, location=location)
                return status, await read_capped(response, self._max_body, path)
        except httpx.TimeoutException as exc:
            raise CloudTransient(f"timeout calling {path}") from exc
        except httpx.TransportError as exc:
            error = await self._transport_error(exc)
            raise error from exc

    def _url(self, path: str) -> httpx.URL:
        """`path` on the base URL, as the client merges it, parsed once: an absolute URL is
        sent as it is, where a path is parsed and merged again on every request."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = self._http.build_request("POST", path).url
        return url

    async def _transport_error(self, exc: httpx.TransportError) -> CloudUnavailable:
        tls = ssl_cause(exc)
        if tls is None:
            return CloudTransient(f"cannot reach the cloud: {type(exc).__name__}")
        url = self._http.base_url
        port = url.port or (443 if url.scheme == "https" else 80)
        why = await describe(tls, url.host, port, timeout_s=self._connect_timeout_s)
        if isinstance(tls, ssl.SSLCertVerificationError):
            return CloudUnavailable(why)  # the same certificate fails the next try too
        return CloudTransient(why)

    async def post_json(
        self,
        path: str,
        body: dict[str, Any],
        *,
        deadline_s: float,
        max_attempts: int = 5,
        watch: Stopwatch | None = None,
    ) -> tuple[int, Any]:
        """POST with retries on transient failures, all within `deadline_s`. With `watch`,
        the time on the wire (request out to answer read, waits between retries included) is
        its `cloud` lap and the time before it `encode`."""
        content = jsonx.dumps(body).encode("utf-8")
        return await self._post(path, content, deadline_s, max_attempts, watch or Stopwatch())

    async def _post(
        self, path: str, content: bytes, deadline_s: float, max_attempts: int, watch: Stopwatch
    ) -> tuple[int, Any]:
        watch.lap("encode")
        try:
            async with asyncio.timeout(deadline_s):
                async for attempt in retrying(within_s=deadline_s, max_attempts=max_attempts):
                    with attempt:
                        answer = await self._attempt(path, content, watch)
                        self._unreachable = False
                        return answer
        except TimeoutError as exc:
            self._unreachable = True
            raise CloudUnavailable(f"no answer from {path} within {deadline_s:g}s") from exc
        except CloudUnavailable:
            self._unreachable = True
            raise
        except CloudError:
            self._unreachable = False  # it answered, just not well
            raise
        raise CloudUnavailable(f"no answer from {path}")  # pragma: no cover - reraise=True

    async def post_batch(
        self, path: str, body: dict[str, Any], *, deadline_s: float, max_attempts: int = 5
    ) -> int | None:
        """POST a batch (`body["batch"]`, SPEC §3.3): how many of its entries the cloud took,
        in order (at most all), or None when the cloud does not take the batch form — a 404 or
        400, or a 2xx without an `accepted` count (a cloud that ignored the form answers so).
        A 409 is a batch the cloud had already taken (a retry with the same `request_id`).
        Retries and the deadline are `post_json`'s, with the same body and `request_id`."""
        size = len(body["batch"])
        try:
            status, answer = await self.post_json(
                path, body, deadline_s=deadline_s, max_attempts=max_attempts
            )
        except CloudRejected as exc:
            if exc.status in BATCH_REFUSED:
                return None
            raise
        if status == 409:
            return size
        try:
            accepted = BatchAnswer.model_validate(answer).accepted
        except ValidationError:
            return None
        return min(accepted, size)

    async def turn(
        self,
        request: TurnRequest,
        *,
        deadline_s: float,
        max_attempts: int = 5,
        watch: Stopwatch | None = None,
    ) -> TurnResponse:
        """The planner's answer, validated; `watch` gets `encode`, `cloud` and `decode` laps."""
        watch = watch or Stopwatch()
        # pydantic writes the JSON itself (UTF-8 as is, no spaces: what jsonx.dumps writes)
        # without first copying the request, its 4 KB snapshot included, into new dicts
        content = request.model_dump_json().encode("utf-8")
        status, body = await self._post(TURN_PATH, content, deadline_s, max_attempts, watch)
        if status != 200 or not isinstance(body, dict):
            raise CloudBadResponse(f"turn answered HTTP {status} without a response object")
        try:
            response = TurnResponse.model_validate(body)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise CloudBadResponse(f"turn response invalid at {where}: {err['msg']}") from exc
        if response.request_id != request.request_id:
            raise CloudBadResponse("turn response carries another request_id")
        watch.lap("decode")
        return response
