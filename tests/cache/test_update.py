from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cache.model import SessionRow, SyncPosition
from cache.sessions import choose_session
from cache.update import UpdateInput, plan_update, sync_refusal, sync_to_adopt


@pytest.mark.parametrize(
    ("current", "offered", "adopted"),
    [
        (SyncPosition("", ""), SyncPosition("cur-2", "v2"), True),
        (SyncPosition("cur-2", "v2"), SyncPosition("cur-3", "v3"), True),
        (SyncPosition("cur-2", "v2"), SyncPosition("cur-9", "v2"), True),
        (SyncPosition("cur-3", "v10"), SyncPosition("cur-2", "v9"), False),
        (SyncPosition("cur-3", "v3"), SyncPosition("cur-x", "weird"), False),
        (SyncPosition("cur-3", "v3"), SyncPosition("cur-3", "v3"), False),
        (SyncPosition("cur-2", "v2"), SyncPosition("cur-x", "v9999999999"), False),
        (SyncPosition("", ""), SyncPosition("cur-x", "v9999999999"), False),
        (SyncPosition("cur-2", "v2"), SyncPosition("cur-x", "v1000003"), False),
        (SyncPosition("cur-2", "v2"), SyncPosition("cur-x", "v1000002"), True),
        # adopted before there was a ceiling: counts as unreadable, the next sane one is taken
        (SyncPosition("cur-x", "v9999999999"), SyncPosition("cur-3", "v3"), True),
    ],
)
def test_sync_never_moves_backwards(
    current: SyncPosition, offered: SyncPosition, adopted: bool
) -> None:
    assert (sync_to_adopt(current, offered) == offered) is adopted


def test_a_version_far_ahead_is_refused_with_a_reason() -> None:
    ours = SyncPosition("cur-2", "v2")
    assert "ceiling" in (sync_refusal(ours, SyncPosition("c", "v9999999999")) or "")
    assert "more than 1000000 ahead" in (sync_refusal(ours, SyncPosition("c", "v2000000")) or "")
    assert "not of the form vN" in (sync_refusal(ours, SyncPosition("c", "weird")) or "")
    # backwards: refused with a reason, as a malformed one is (issue 35), unless forced
    assert "behind ours" in (sync_refusal(ours, SyncPosition("c", "v1")) or "")
    assert sync_refusal(ours, SyncPosition("c", "v1"), force=True) is None
    # a 409's position may go backwards or be unreadable, never past the bounds
    assert sync_refusal(ours, SyncPosition("c", "weird"), force=True) is None
    assert sync_refusal(ours, SyncPosition("c", "v9999999999"), force=True)
    update = UpdateInput(reply_text="x", route_family="DEF", sync=SyncPosition("c", "v9999999999"))
    changes = plan_update(update, ours, frozenset())
    assert changes.sync is None and "ceiling" in (changes.sync_refused or "")


def test_seed_update_fills_the_assistant_text_and_keeps_the_summary() -> None:
    update = UpdateInput(
        reply_text="네, 기억해 둘게요.",
        route_family="DEF",
        pair_assistant_text="",
        pair_route_family="DEF",
        last_route="DEF",
        session_summary="",
        sync=SyncPosition("cur-2", "v2"),
    )
    changes = plan_update(update, SyncPosition("cur-1", "v1"), frozenset())
    assert changes.assistant_text == "네, 기억해 둘게요."
    assert changes.route_family == "DEF"
    assert changes.last_route == "DEF"
    assert changes.session_summary is None  # empty keeps the stored one
    assert changes.sync == SyncPosition("cur-2", "v2")


def test_workflow_ids_only_when_accepted() -> None:
    update = UpdateInput(
        reply_text="x", route_family="ODL", pair_workflow_id="wf-1", active_workflow_id="wf-1"
    )
    refused = plan_update(update, SyncPosition(), frozenset())
    assert refused.workflow_id == "" and refused.active_workflow_id is None
    taken = plan_update(update, SyncPosition(), frozenset({"wf-1"}))
    assert taken.workflow_id == "wf-1" and taken.active_workflow_id == "wf-1"


def test_a_pair_the_planner_did_not_name_a_workflow_for_gets_the_turns_accepted_one() -> None:
    """docs/contract.md §3.2: a pair's `workflow_id` is `""` only when the turn started none.
    On main a turn that started wf-2 while the planner's short_term_pair named none (or a
    refused one) kept `""`."""
    unnamed = UpdateInput(reply_text="x", route_family="ODL")
    assert plan_update(unnamed, SyncPosition(), ("wf-2", "wf-3")).workflow_id == "wf-2"
    refused = UpdateInput(reply_text="x", route_family="ODL", pair_workflow_id="wf-9")
    assert plan_update(refused, SyncPosition(), ("wf-2",)).workflow_id == "wf-2"
    named = UpdateInput(reply_text="x", route_family="ODL", pair_workflow_id="wf-3")
    assert plan_update(named, SyncPosition(), ("wf-2", "wf-3")).workflow_id == "wf-3"
    assert plan_update(unnamed, SyncPosition(), ()).workflow_id == ""


def test_sessions_follow_the_request_then_idle_time() -> None:
    now = datetime(2026, 6, 24, 20, 0, tzinfo=UTC)
    recent = SessionRow("session-a", (now - timedelta(seconds=100)).isoformat())
    stale = SessionRow("session-a", (now - timedelta(seconds=2000)).isoformat())
    assert choose_session("session-x", recent, now, 1800, "session-new") == "session-x"
    assert choose_session(None, recent, now, 1800, "session-new") == "session-a"
    assert choose_session(None, stale, now, 1800, "session-new") == "session-new"
    assert choose_session(None, None, now, 1800, "session-new") == "session-new"
