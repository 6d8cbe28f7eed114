"""A request id applied before (SPEC §2.4): the same content again gets the stored answer again
(applied once); other content under the same id is refused `duplicate_request_id`, with `ref`,
and answered on the input's result topic. One rule for consent, forget and admin requests;
and the deadline an admin request may carry (`expires_at`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from edge.app.parts import AppParts
from edge.channel.topics import EXPIRY_GRACE_S, Refusal

REUSED = Refusal("duplicate_request_id", "this request_id was applied with other content")


def answered_before(
    app: AppParts,
    key: str,
    content: str,
    *,
    topic: str,
    answer_topic: str,
    refused: dict[str, Any],
) -> bool:
    """True when `key` was applied before and this arrival got its outcome here: the stored
    answer again (a repeat; a mark without `content` or answer is an old one: silent) or, for
    other content, `refused` on `answer_topic` and a refusal on `P/runtime/error`."""
    seen = app.dedupe.seen(key)
    if seen is None:
        return False
    if seen.fingerprint in (None, content):
        if seen.answer is not None:
            with app.unit():
                app.outbox.enqueue(answer_topic, seen.answer)
        return True
    with app.unit():
        app.outbox.enqueue(answer_topic, refused)
    app.refuse(topic, REUSED, ref={"request_id": refused["request_id"]})
    return True


EXPIRED = Refusal("expired", "the request's expires_at has passed: its sender gave up on it")


def expired(expires_at: datetime | None, now: datetime) -> bool:
    """A request with a deadline (`expires_at`) that has passed, by more than the grace; one
    without a deadline (other tools) never expires."""
    return expires_at is not None and now > expires_at + timedelta(seconds=EXPIRY_GRACE_S)
