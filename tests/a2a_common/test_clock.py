"""The clocks and the one timestamp form."""

from __future__ import annotations


def test_iso_is_utc_with_milliseconds_truncated_and_a_z() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from a2a_common.clock import iso

    seoul = timezone(timedelta(hours=9))
    assert iso(datetime(2026, 11, 30, 9, 0, 1, 999999, tzinfo=seoul)) == "2026-11-30T00:00:01.999Z"
    assert iso(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000Z"
    assert iso(datetime(5, 6, 7, 8, 9, 10, 11000, tzinfo=UTC)) == "0005-06-07T08:09:10.011Z"


def test_iso_remembers_instants_and_stays_bounded() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from a2a_common import clock

    seoul = timezone(timedelta(hours=9))
    start = datetime(2026, 11, 30, 9, 0, 1, 999999, tzinfo=seoul)
    assert clock.iso(start) == clock.iso(start.astimezone(UTC)) == "2026-11-30T00:00:01.999Z"
    for n in range(clock.MAX_ISO + 10):  # more instants than it keeps: every one still right
        ts = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=n)
        assert clock.iso(ts) == f"2026-01-01T00:00:{n // 1000:02d}.{n % 1000:03d}Z"
    assert len(clock._ISO) <= clock.MAX_ISO
