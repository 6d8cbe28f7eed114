"""What `P/observation` may cost and what a turn carries of it (edge/app/observations.py)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from a2a_common.clock import ManualClock
from edge.app.observations import ObservationGate


def gate(clock: ManualClock, **over: Any) -> ObservationGate:
    return ObservationGate(clock=clock, **{"per_s": 5.0, "kinds": 3, "latest": {}, **over})


def put(g: ObservationGate, kind: str, oid: str, age_s: float, value: Any = 1) -> bool:
    at = g._clock.now() - timedelta(seconds=age_s)
    fresh = g.newer(kind, oid, at, {"scope": {}, "value": {"v": value}})
    if fresh is not None:
        g.latest = fresh
    return fresh is not None


def test_a_burst_then_the_rate_per_kind() -> None:
    clock = ManualClock()
    g = gate(clock)
    assert sum(g.allow("noise") for _ in range(30)) == 10  # a burst of twice the rate
    assert g.allow("air_quality")  # every kind has its own bucket
    clock.advance(1.0)
    assert sum(g.allow("noise") for _ in range(30)) == 5


@pytest.mark.parametrize(
    ("age_s", "replaces"),
    [(5, True), (20, False), (10, False), (-4, True), (-6, False)],  # held: 10 s old
)
def test_only_a_newer_one_not_from_the_future_replaces_the_latest(
    age_s: float, replaces: bool
) -> None:
    g = gate(ManualClock())
    assert put(g, "noise", "a", 10)
    assert put(g, "noise", "b", age_s) == replaces
    assert g.latest["noise"]["observation_id"] == ("b" if replaces else "a")


def test_kinds_are_bounded_and_a_turn_carries_the_recent_ones_newest_first() -> None:
    clock = ManualClock()
    g = gate(clock)
    for i, kind in enumerate(["a", "b", "c", "d"]):
        put(g, kind, f"o{i}", 100 - i * 10)
    assert set(g.latest) == {"b", "c", "d"}  # the least recently observed went
    clock.advance(515)  # "b" is 605 s old now, past the turn's 10 minutes; "c" 595 s
    shown = g.for_turn()
    assert list(shown) == ["d", "c"] and set(shown["d"]) == {"value", "scope", "observed_at"}


def test_repeats_by_id_and_by_the_stored_latest() -> None:
    g = gate(ManualClock())
    put(g, "noise", "a", 1)
    assert g.repeat("noise", "a")  # also after a restart: it is the stored one
    assert not g.repeat("noise", "b")
    g.remember("b")
    assert g.repeat("air_quality", "b")


def test_sensitive_text_in_an_observation_does_not_go_to_the_cloud(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from cache.lexicon import parse_lexicon, shipped
    from cache.privacy import CategoryPolicy, PrivacyPolicy

    hobby = shipped().extended(parse_lexicon({"hobby": ["낚시"]}))
    privacy = PrivacyPolicy(categories={"hobby": CategoryPolicy(share=False)}, lexicon=hobby)
    clock = ManualClock()
    g = gate(clock, privacy=lambda: privacy)
    said = "혈압 150, 전화번호 010-1234-5678"
    at = clock.now()
    entry = {
        "scope": {"room": "거실"},
        "value": {"note": said, "level": 3, "tags": ["quiet", "낚시 중"], "who": "엄마"},
    }
    g.latest = g.newer("presence", "o-1", at, entry) or {}
    g.latest = (
        g.newer("memo", "o-2", at, {"scope": {}, "value": "ｂｌｏｏｄ ｐｒｅｓｓｕｒｅ"}) or {}
    )
    caplog.set_level(logging.DEBUG)
    sent = g.for_turn()
    g.for_turn()
    assert sent["presence"]["value"] == {"level": 3, "tags": ["quiet"], "who": "엄마"}
    assert sent["presence"]["scope"] == {"room": "거실"}
    assert "value" not in sent["memo"] and sent["memo"]["observed_at"]
    assert g.latest["presence"]["value"]["note"] == said  # kept on the device
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "150" not in logged and "혈압" not in logged and "낚시" not in logged
    assert len(caplog.records) == 2  # once per observation, not per turn
    assert "contact, health, hobby" in logged
