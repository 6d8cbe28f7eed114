"""Forgetting a profile key with and without its source pairs, through the app's admin and
forget handlers and the CLI's request."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from edge.cli import entry as cli
from edge.cli import memory as cli_memory
from tests.edge.test_app import Robot

HEALTH = "나 고혈압이 있어서 약 먹고 있어"


def update_with(*candidates: dict[str, Any]) -> dict[str, Any]:
    return {
        "memory_update": {
            "write_candidates": {
                "short_term_pair": {"assistant_text": "", "route_family": "CHAT"},
                "profile_candidates": list(candidates),
            }
        }
    }


@pytest.fixture
def robot(tmp_path: Path) -> Iterator[Robot]:
    robot = Robot(tmp_path, privacy={"consented_categories": ["health"]})
    yield robot
    asyncio.run(robot.app.close())


def test_a_key_forgets_its_pairs_unless_asked_to_keep_them(robot: Robot) -> None:
    robot.cloud.turn = update_with({"key": "condition", "value": "고혈압", "category": "health"})
    robot.say("t1", HEALTH)
    robot.cloud.turn = update_with({"key": "allergy", "value": "땅콩", "category": "health"})
    robot.say("t2", "땅콩 알레르기 있어")
    refused = robot.admin("r0", "memory.forget", scope="profile_key", id="allergy", with_sources=1)
    assert refused["error"] == "args.with_sources must be true or false"
    kept = robot.admin("r1", "memory.forget", scope="profile_key", id="allergy", with_sources=False)
    assert kept["result"]["removed"]["pairs"] == 0
    assert robot.rows("SELECT turn_id FROM pairs ORDER BY turn_id") == [("t1",), ("t2",)]
    gone = robot.admin("r2", "memory.forget", scope="profile_key", id="condition")
    assert gone["result"]["removed"] == {
        "pairs": 1,
        "sessions": 0,
        "profile_items": 1,
        "summaries": 0,
        "outbox": 0,
    }
    assert robot.rows("SELECT turn_id FROM pairs") == [("t2",)]
    tombstones = robot.rows(
        "SELECT json_extract(payload, '$.with_sources'), json_extract(payload, '$.pair_ids')"
        " FROM sync_outbox WHERE kind = 'memory_deletion' ORDER BY write_id"
    )
    assert [t[0] for t in tombstones] == [0, 1] and tombstones[0][1] == "[]"


def test_the_cli_asks_to_keep_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[dict[str, Any]] = []

    def capture(args: argparse.Namespace, command: str, payload: dict[str, Any]) -> Any:
        sent.append(payload)
        return {"ok": True, "result": {"removed": {"pairs": 1}}}

    monkeypatch.setattr(cli_memory, "ask", capture)
    for argv in (["--key", "k", "--keep-sources"], ["--key", "k"], ["--pair", "p"]):
        args = cli.parser().parse_args(["memory", "forget", *argv])
        args.func(args)
    assert sent == [
        {"scope": "profile_key", "id": "k", "with_sources": False},
        {"scope": "profile_key", "id": "k"},
        {"scope": "pair", "id": "p"},
    ]
