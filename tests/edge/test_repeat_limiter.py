"""A flood of one kind of line is written `lines` times a window, the rest counted in one line
at the window's end (edge/host/log.py RepeatLimiter; issue 30, item 16a)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from a2a_common.clock import ManualClock
from edge.host.log import MAX_KINDS, RepeatLimiter

log = logging.getLogger("tests.repeat")


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == log.name]


def test_the_first_lines_of_a_kind_are_written_then_one_line_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    limiter = RepeatLimiter(log, 3, 60, clock.monotonic)
    with caplog.at_level(logging.DEBUG, logger=log.name):
        written = [limiter.say("a", logging.WARNING, "refused %d", n) for n in range(1000)]
        limiter.say("b", logging.WARNING, "other kind")  # a kind of its own: its own lines
        assert written.count(True) == 3 and said(caplog)[:3] == [
            "refused 0",
            "refused 1",
            "refused 2",
        ]
        clock.advance(59)
        limiter.flush()
        assert len(said(caplog)) == 4  # the window has not ended
        clock.advance(1)
        limiter.say("a", logging.WARNING, "refused again")
    lines = said(caplog)
    assert lines[4] == "997 more lines like a in 60 s not written (limit 3 a window)"
    assert lines[5] == "refused again"  # a new window
    assert limiter.held_back == 997
    held = [r for r in caplog.records if getattr(r, "fields", {}).get("held_back")]
    assert [(r.levelname, r.fields) for r in held] == [  # type: ignore[attr-defined]
        ("WARNING", {"kind": "a", "held_back": 997})
    ]


def test_kinds_a_sender_varies_stay_a_bounded_set(caplog: pytest.LogCaptureFixture) -> None:
    limiter = RepeatLimiter(log, 1, 60, ManualClock().monotonic)
    with caplog.at_level(logging.WARNING, logger=log.name):
        for n in range(MAX_KINDS * 4):
            limiter.say(f"kind-{n}", logging.WARNING, "line %d", n)
    assert len(said(caplog)) == MAX_KINDS + 1


def test_on_a_loop_the_windows_end_brings_its_line_unasked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def flood() -> None:
        limiter = RepeatLimiter(log, 1, 0.05, asyncio.get_running_loop().time)
        for _ in range(5):
            limiter.say("a", logging.WARNING, "refused")
        await asyncio.sleep(0.3)

    with caplog.at_level(logging.WARNING, logger=log.name):
        asyncio.run(flood())
    assert said(caplog) == [
        "refused",
        "4 more lines like a in 0.05 s not written (limit 1 a window)",
    ]
