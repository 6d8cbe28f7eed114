from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_common.jsonx import canonical
from cache.model import CacheView, DailySummary, PairView, ProfileView, SyncPosition
from cache.snapshot import build_snapshot, size_of
from cloud_client.models import MemorySnapshot
from tests.conftest import fixture_json


def seed_view() -> CacheView:
    return CacheView(
        recent_pairs=(PairView("거실 청정해줘", "시작할게요"),),
        session_summary="오늘 거실 청정을 자주 요청함",
        daily_summaries=(DailySummary("2026-06-24", "저녁에 청정을 자주 요청"),),
        weekly_digest="저녁에 청정을 자주 요청",
        profile_items=(ProfileView("preferred_room", "거실"),),
        sync=SyncPosition("cur-2", "v2"),
    )


def test_seed_input_example_is_reproduced_field_for_field() -> None:
    expected = fixture_json("seed_turn_input.json")["voice_context"]["memory_snapshot"]
    assert build_snapshot(seed_view(), 4096) == expected


def test_empty_cache_still_has_the_whole_shape_and_sync() -> None:
    snap = build_snapshot(CacheView(sync=SyncPosition("c", "v1")), 4096)
    assert snap == {
        "source": "ondevice_cache",
        "short_term": {"recent_pairs": [], "session_summary": ""},
        "mid_term": {"daily_summaries": [], "weekly_digest": ""},
        "long_term": {"profile_items": []},
        "sync": {"cursor": "c", "version": "v1"},
    }


def test_newest_pairs_kept_in_order_and_limited() -> None:
    pairs = tuple(PairView(f"u{i}", f"a{i}", "DEF") for i in range(10))
    snap = build_snapshot(CacheView(recent_pairs=pairs), 4096, recent_pairs=6)
    assert [p["user"] for p in snap["short_term"]["recent_pairs"]] == [
        f"u{i}" for i in range(4, 10)
    ]


def test_long_text_is_cut_at_a_character_not_a_byte() -> None:
    view = CacheView(recent_pairs=(PairView("청" * 3000, "정" * 3000),))
    snap = build_snapshot(view, 1024)
    data = canonical(snap)
    assert len(data) <= 1024
    data.decode("utf-8")  # never split inside a character
    user = snap["short_term"]["recent_pairs"][0]["user"]
    assert user and set(user) == {"청"}


def test_low_priority_items_drop_first() -> None:
    view = CacheView(
        recent_pairs=(PairView("최근 대화", "응답"),),
        session_summary="요약" * 10,
        daily_summaries=tuple(
            DailySummary(f"2026-06-{d:02d}", "일일 요약 " * 30) for d in range(1, 8)
        ),
        weekly_digest="주간",
        sync=SyncPosition("cur", "v9"),
    )
    snap = build_snapshot(view, 700)
    assert size_of(snap) <= 700
    assert snap["short_term"]["recent_pairs"][0]["user"] == "최근 대화"
    assert snap["short_term"]["session_summary"] == "요약" * 10
    assert snap["mid_term"]["weekly_digest"] == "주간"
    assert len(snap["mid_term"]["daily_summaries"]) < 7


texts = st.text(min_size=0, max_size=400)
views = st.builds(
    CacheView,
    recent_pairs=st.lists(
        st.builds(PairView, texts, texts, st.none() | st.just("ODL")), max_size=8
    ).map(tuple),
    session_summary=texts,
    daily_summaries=st.lists(st.builds(DailySummary, st.just("2026-06-24"), texts), max_size=9).map(
        tuple
    ),
    weekly_digest=texts,
    profile_items=st.lists(
        st.builds(ProfileView, st.text(min_size=1, max_size=20), texts), max_size=5
    ).map(tuple),
    sync=st.builds(SyncPosition, st.just("cur-1"), st.just("v1")),
)


@settings(max_examples=200, deadline=None)
@given(views, st.integers(min_value=256, max_value=4096))
def test_never_over_budget_and_deterministic(view: CacheView, budget: int) -> None:
    first = build_snapshot(view, budget)
    MemorySnapshot.model_validate(first)
    assert size_of(first) <= budget
    assert canonical(first) == canonical(build_snapshot(view, budget))
