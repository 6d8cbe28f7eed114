"""`a2a-edge memory pairs` shows each pair's privacy categories (SPEC 5.5: what keeps a pair on
the device or out of a snapshot), in the table and in `--json`, under the name docs/cli.md
lists. On main neither showed them: an operator could not see why a pair was not synced."""

from __future__ import annotations

import json

from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory
from tests.e2e.test_cli_answers import a2a_edge, answer_of


def test_memory_pairs_shows_each_pairs_categories(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime = runtime_factory()
    config = str(runtime.config)
    probe.turn("t-1", "혈압약 먹었어?")
    probe.turn("t-2", "안녕")
    rows = answer_of(a2a_edge("memory", "pairs", "--config", config, "--json"))
    by_turn = {row["turn_id"]: row for row in rows}
    assert by_turn["t-1"]["categories"] == ["health"]
    assert by_turn["t-2"]["categories"] == []
    done = a2a_edge("memory", "pairs", "--config", config)
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0].split()
    assert "categories" in header, header
    [health] = [line for line in done.stdout.splitlines() if by_turn["t-1"]["pair_id"] in line]
    assert "health" in health
    assert json.dumps(rows, ensure_ascii=False).count("health") == 1
