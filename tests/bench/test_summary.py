"""benchlib.record and bench.summary: the figures a bench leaves are the ones the table shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import summary
from bench.benchlib import record


def test_record_keeps_every_key_of_a_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_OUT", str(tmp_path))
    record("peers", "ours_jobs_s", 80.5)
    record("peers", "huey_paho_jobs_s", 350.0)
    record("peers", "ours_jobs_s", 90.0)  # a later value wins
    assert json.loads((tmp_path / "peers.json").read_text()) == {
        "huey_paho_jobs_s": 350.0,
        "ours_jobs_s": 90.0,
    }


def test_record_without_bench_out_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BENCH_OUT", raising=False)
    monkeypatch.chdir(tmp_path)
    record("peers", "ours_jobs_s", 1.0)
    assert list(tmp_path.iterdir()) == []


def test_summary_shows_goals_ratios_and_what_was_not_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BENCH_OUT", str(tmp_path))
    record("floor", "ours_press_to_cancels_p99_ms", 2.5)
    record("floor", "floor_press_to_cancels_p99_ms", 2.0)
    record("floor", "ratio_press_to_cancels_p99", 1.25)
    record("runtime", "steady_rss_mb", 58.0)
    record("runtime", "floor_rss_mb", 40.0)
    record("runtime", "rss_over_floor_mb", 18.0)
    record("loaded", "loaded_at_unit_p99_ms", 30.0)
    record("loaded", "at_unit_over_unloaded", 2.5)
    record("floor", "ours_cpu_us_per_turn", 9000)
    record("floor", "floor_cpu_us_per_turn", 2000)
    record("floor", "ratio_per_turn", 4.5)
    record("floor", "ours_bytes_per_callback", 12288)
    record("floor", "floor_bytes_per_callback", 4096)
    record("floor", "ratio_bytes_per_callback", 3.0)
    monkeypatch.setattr("sys.argv", ["summary"])
    summary.main()
    lines = {line.split("  ")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "met" in lines["PUI press → every task/cancel, p99"]
    assert "not yet" in lines["steady RSS, runtime-only venv"]  # over the floor by 18 MB > 15
    assert "import floor 40.0 MB; ours − floor 18.0 MB" in lines["steady RSS, runtime-only venv"]
    assert "met" in lines["PUI press → cancels, p99, cores saturated, unit's nice"]
    assert "not measured" in lines["cold start to READY=1 (year-old DB)"]
    assert "floor 2000 µs; ours/floor 4.5×" in lines["CPU per turn"]
    assert "not yet" in lines["CPU per turn"]
    assert "12288 B" in lines["bytes written per callback"]
    assert "not yet" in lines["bytes written per callback"]  # 3× the floor's
    assert "not measured" in lines["durable single-step jobs/s"]
