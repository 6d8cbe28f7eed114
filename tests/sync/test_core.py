"""The pure replay planning: acks, rejections, conflicts, poison halving — over batches as the
outbox hands them out (oldest first)."""

from __future__ import annotations

from a2a_common.db import Database
from a2a_common.writes import SyncWrite
from sync.core import Pending, Position, plan_answer
from sync.outbox import SyncOutbox


def batch(n: int, start: int = 0) -> list[Pending]:
    return [
        Pending(f"w{i:03d}", "short_term_pair", "2026-06-24T20:00:00.000Z", {"i": i})
        for i in range(start, start + n)
    ]


def queue(db: Database, outbox: SyncOutbox, n: int) -> list[str]:
    """`n` writes, payload `{"i": i}`, in one transaction; their write ids in queue order."""
    with db.atomic():
        return outbox.enqueue(SyncWrite("short_term_pair", {"i": i}) for i in range(n))


def test_oldest_first_in_batches(state_db: Database, outbox: SyncOutbox) -> None:
    ids = queue(state_db, outbox, 250)
    first = outbox.oldest(100)
    assert [w.write_id for w in first] == ids[:100]
    assert [w.payload["i"] for w in first] == list(range(100))
    with state_db.atomic():
        outbox.ack(ids[:100])
    assert [w.write_id for w in outbox.oldest(100)] == ids[100:200]


def test_ok_answer_acks_rejects_and_keeps_the_rest() -> None:
    sent = batch(4)
    body = {
        "sync": {"cursor": "cur-9", "version": "v9"},
        "acked": ["w000", "w001", "zzz"],
        "rejected": [{"write_id": "w002", "reason": "bad"}],
        "updates": {"x": 1},
    }
    plan = plan_answer(sent, 200, body, limit=100, batch_size=100)
    assert plan.ack == ("w000", "w001")  # an id not sent is ignored
    assert plan.dead == (("w002", "bad"),)
    assert plan.unacked == ("w003",)
    assert plan.sync == Position("cur-9", "v9") and not plan.force_sync
    assert plan.updates == {"x": 1} and not plan.resend


def test_conflict_applies_updates_adopts_and_resends() -> None:
    body = {
        "error": "version_conflict",
        "sync": {"cursor": "cur-2", "version": "v2"},
        "updates": {"deleted_profile_keys": ["k"]},
    }
    plan = plan_answer(batch(3), 409, body, limit=100, batch_size=100)
    assert plan.resend and plan.force_sync and plan.ack == ()
    assert plan.sync == Position("cur-2", "v2")
    assert plan.updates == {"deleted_profile_keys": ["k"]}


def test_whole_batch_4xx_halves_until_one_write_is_dead(
    state_db: Database, outbox: SyncOutbox
) -> None:
    poison = 57  # writes before it must be acked on the way, in order
    ids = queue(state_db, outbox, 100)
    limit, requests = 100, 0
    acked: list[str] = []
    dead: list[tuple[str, str]] = []
    while sent := outbox.oldest(limit):
        requests += 1
        if any(w.payload["i"] == poison for w in sent):
            plan = plan_answer(sent, 422, {"error": "unprocessable"}, limit=limit, batch_size=100)
        else:
            plan = plan_answer(
                sent, 200, {"acked": [w.write_id for w in sent]}, limit=limit, batch_size=100
            )
        acked += plan.ack
        dead += plan.dead
        with state_db.atomic():
            outbox.ack(plan.ack)
            outbox.kill(plan.dead)
        limit = plan.next_limit
    assert dead == [(ids[poison], "HTTP 422: unprocessable")]
    assert acked == [w for i, w in enumerate(ids) if i != poison]
    assert requests < 40
    assert outbox.pending() == 0 and outbox.dead_count() == 1


def test_garbage_answer_keeps_everything() -> None:
    plan = plan_answer(batch(2), 200, {"acked": "all"}, limit=100, batch_size=100)
    assert plan.ack == () and plan.unacked == ("w000", "w001") and plan.error
    odd = plan_answer(batch(2), 409, {"error": "other"}, limit=100, batch_size=100)
    assert odd.ack == () and not odd.resend


def test_an_answer_that_settles_nothing_makes_no_progress() -> None:
    for body in ({"acked": []}, {"acked": ["not-sent"]}, {"acked": "all"}):
        plan = plan_answer(batch(3), 200, body, limit=100, batch_size=100)
        assert not plan.progress and plan.unacked == ("w000", "w001", "w002") and plan.error
    assert "settled none of the 3" in (
        plan_answer(batch(3), 200, {"acked": []}, limit=100, batch_size=100).error or ""
    )
    some = plan_answer(batch(3), 200, {"acked": ["w001"]}, limit=100, batch_size=100)
    assert some.progress and some.error is None
    odd = plan_answer(batch(2), 409, {"error": "other"}, limit=100, batch_size=100)
    assert not odd.progress


def test_a_redirect_is_an_error_naming_its_location() -> None:
    where = "https://elsewhere.example/sync"
    plan = plan_answer(batch(2), 301, None, limit=100, batch_size=100, location=where)
    assert plan.error == f"HTTP 301 redirect to {where}"
    assert not plan.progress and plan.unacked == ("w000", "w001") and plan.sync is None
    bare = plan_answer(batch(1), 307, None, limit=100, batch_size=100)
    assert bare.error == "HTTP 307 redirect (not followed)"


def test_an_oversized_sync_position_is_not_the_contract() -> None:
    body = {"acked": ["w000"], "sync": {"cursor": "c", "version": "v" + "9" * 40}}
    plan = plan_answer(batch(1), 200, body, limit=100, batch_size=100)
    assert plan.ack == () and not plan.progress
    assert (plan.error or "").startswith("sync answer is not the contract: sync.version")


def test_a_dead_letter_reason_is_cut() -> None:
    body = {"rejected": [{"write_id": "w000", "reason": "x" * 100_000}]}
    plan = plan_answer(batch(1), 200, body, limit=100, batch_size=100)
    assert plan.progress and len(plan.dead[0][1]) == 300
