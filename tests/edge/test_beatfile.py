"""The heartbeat file (edge/host/beatfile.py): one page, overwritten in place, read back whole
or not at all."""

from __future__ import annotations

from pathlib import Path

from edge.host.beatfile import SIZE, BeatFile, read_beat


def test_a_beat_is_overwritten_in_place_and_read_back(tmp_path: Path) -> None:
    beats = BeatFile(tmp_path)
    assert beats.write({"ts": "2026-01-01T00:00:00.000Z", "health": "ok", "problems": []})
    inode = (tmp_path / "heartbeat").stat().st_ino
    assert beats.write({"ts": "2026-01-01T00:00:05.000Z", "health": "degraded", "problems": ["방"]})
    st = (tmp_path / "heartbeat").stat()
    assert (st.st_ino, st.st_size, st.st_mode & 0o777) == (inode, SIZE, 0o600)  # no new block
    assert read_beat(tmp_path) == {
        "ts": "2026-01-01T00:00:05.000Z",
        "health": "degraded",
        "problems": ["방"],
    }
    beats.close()


def test_a_beat_too_large_keeps_its_first_problems(tmp_path: Path) -> None:
    problems = [f"problem {n} " + "x" * 200 for n in range(50)]
    assert BeatFile(tmp_path).write({"ts": "2026-01-01T00:00:00.000Z", "problems": problems})
    read = read_beat(tmp_path)
    assert read is not None and read["problems"][0] == problems[0]
    assert read["problems"][-1] == "(more problems: see the log)"


def test_a_torn_or_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert read_beat(tmp_path) is None
    (tmp_path / "heartbeat").write_bytes(b'{"ts":"2026-01-01T00:00' + b" " * 100)
    assert read_beat(tmp_path) is None
