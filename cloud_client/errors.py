"""What can go wrong talking to the cloud, translated from httpx where it enters."""

from __future__ import annotations

from a2a_common.errors import EdgeError


class CloudError(EdgeError):
    """Root of the cloud client's errors."""


class CloudUnavailable(CloudError):
    """No usable answer in time: connect error, timeout, 429/5xx after retries, deadline."""


class CloudTransient(CloudUnavailable):
    """One attempt failed in a way worth retrying (the retry policy retries only this)."""


class CloudRejected(CloudError):
    """The cloud answered a 4xx that retrying will not change (or a 3xx: redirects are not
    followed; `location` is where it pointed)."""

    def __init__(self, status: int, body: object, *, location: str | None = None) -> None:
        super().__init__(f"cloud rejected the request with HTTP {status}")
        self.status = status
        self.body = body
        self.location = location


class CloudBadResponse(CloudError):
    """The cloud answered 2xx with a body that is not the contract."""
