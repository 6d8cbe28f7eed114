"""The one retry policy: exponential backoff with jitter, only for our transient errors."""

from __future__ import annotations

from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from cloud_client.errors import CloudTransient


def retrying(
    *, within_s: float, max_attempts: int = 5, initial_s: float = 0.2, max_wait_s: float = 2.0
) -> AsyncRetrying:
    """Retry CloudTransient until `within_s` has passed or `max_attempts` were made."""
    return AsyncRetrying(
        retry=retry_if_exception_type(CloudTransient),
        wait=wait_exponential_jitter(multiplier=initial_s, max=max_wait_s, jitter=initial_s),
        stop=stop_after_delay(within_s) | stop_after_attempt(max_attempts),
        reraise=True,
    )
