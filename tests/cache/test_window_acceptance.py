"""Issue 30 item 15: evidence outside the window does not confirm (SPEC §5.4). Mentions on three
days made 안방 suggestable; a `suggestion_accepted` a month later confirmed it on main, though
by then none of those mentions was inside `memory.promotion.window_days`. Whether the candidate
is suggestable is judged at the acceptance, on the evidence still inside the window."""

from __future__ import annotations

import pytest

from a2a_common.clock import ManualClock
from cache.memory import Memory
from cache.model import CandidateIn, Evidence, PromotionPolicy
from cache.promotion import replay_status

DAY = 86400.0
MENTION = CandidateIn("preferred_room", "안방", "device_pattern", 0.8)
ACCEPT = CandidateIn("preferred_room", "안방", "device_pattern", 0.8, "suggestion_accepted")


def say(memory: Memory, text: str, cand: CandidateIn) -> None:
    with memory.db.atomic():
        pair_id, session = memory.record_utterance(
            turn_id=f"t-{memory.now().isoformat()}", requested_session=None, text=text
        )
        memory.profile.add_evidence(cand, pair_id=pair_id, session_id=session, source="cloud")


def status(memory: Memory) -> str:
    item = memory.profile.item("preferred_room", "안방")
    assert item is not None
    return str(item["status"])


def rooms(memory: Memory) -> list[str]:
    items = memory.snapshot(None)["long_term"]["profile_items"]  # every confirmed item
    return [i["value"] for i in items if i["key"] == "preferred_room"]


def three_days(memory: Memory, clock: ManualClock) -> None:
    for text in ("안방 청정해줘", "안방 좀 깨끗하게 해줘", "잘 때는 안방 먼저 청정해"):
        say(memory, text, MENTION)
        clock.advance(DAY)
    assert status(memory) == "suggestable"


def test_an_acceptance_a_month_later_confirms_nothing(memory: Memory, clock: ManualClock) -> None:
    three_days(memory, clock)
    clock.advance(30 * DAY)
    say(memory, "응 그렇게 해줘", ACCEPT)
    assert status(memory) != "confirmed"  # main: confirmed
    assert status(memory) == "candidate"  # its evidence left the window
    assert rooms(memory) == []


@pytest.mark.parametrize(("last_day", "confirmed"), [(13, True), (14, False)])
def test_the_window_edge_is_judged_at_the_acceptance(
    memory: Memory, clock: ManualClock, last_day: int, confirmed: bool
) -> None:
    """Mentions on days 0, 1, 2 and the acceptance on day 13 (day 0 is still inside the 14
    local days) or on day 14 (two mentions left: not suggestable)."""
    three_days(memory, clock)  # the clock is on day 3
    clock.advance((last_day - 3) * DAY)
    say(memory, "응 그렇게 해줘", ACCEPT)
    assert (status(memory) == "confirmed") is confirmed
    assert rooms(memory) == (["안방"] if confirmed else [])


def test_an_acceptance_judges_the_evidence_before_it(memory: Memory, clock: ManualClock) -> None:
    """Two mentions, then an acceptance that is itself the third: suggestable, not confirmed
    (it arrived before the candidate was suggestable); the next acceptance confirms."""
    for _ in range(2):
        say(memory, "안방 청정해줘", MENTION)
        clock.advance(DAY)
    say(memory, "응", ACCEPT)
    assert status(memory) == "suggestable"
    clock.advance(DAY)
    say(memory, "응 그래", ACCEPT)
    assert status(memory) == "confirmed"


def test_a_late_mention_does_not_keep_a_faded_candidate_suggestable(
    memory: Memory, clock: ManualClock
) -> None:
    three_days(memory, clock)
    clock.advance(30 * DAY)
    say(memory, "안방", MENTION)
    assert status(memory) == "candidate"


def test_the_replay_after_a_forget_judges_the_same_way() -> None:
    policy = PromotionPolicy()

    def ev(n: int, day: str, kind: str = "mention") -> Evidence:
        return Evidence(f"c{n}", f"p{n}", "s", day, kind)  # type: ignore[arg-type]

    month_later = [ev(1, "2026-06-01"), ev(2, "2026-06-02"), ev(3, "2026-06-04")]
    month_later.append(ev(4, "2026-07-06", "suggestion_accepted"))
    assert replay_status(month_later, policy) == "candidate"
    seed = [*month_later[:3], ev(4, "2026-06-06", "suggestion_accepted")]
    assert replay_status(seed, policy) == "confirmed"
