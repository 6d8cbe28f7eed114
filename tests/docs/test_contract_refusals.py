"""docs/contract.md §2.15's refusal words say where each is sent, as the runtime does it.
`unknown_topic`: the runtime subscribes only to its own inbound topics, so a message on another
topic under P/ never reaches it; on main the page promised a refusal for "a topic under P/ the
runtime does not take", which nothing sends (a publish on `P/nonsense` got no answer)."""

from __future__ import annotations

import re

from tests.docs.contract_doc import CONTRACT, ROOT


def row(word: str) -> str:
    rows = [
        line
        for line in CONTRACT.read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| `{word}` |")
    ]
    assert len(rows) == 1, (word, rows)
    return rows[0]


def test_unknown_topic_is_not_promised_for_topics_the_runtime_never_receives() -> None:
    said = row("unknown_topic")
    assert "a topic under `P/` the runtime does not take" not in said
    assert "never reaches it and gets no answer" in said


def test_the_words_a_turn_is_refused_with_are_said_to_go_in_its_answer() -> None:
    """The turn refusals edge/app/turn_inputs.py sends through `reject` (its `turn/response`,
    `rejected`) and never on P/runtime/error; on main `duplicate_turn_id` read as a
    P/runtime/error word."""
    source = (ROOT / "edge" / "app" / "turn_inputs.py").read_text(encoding="utf-8")
    words = set(re.findall(r'Refusal\("([a-z_]+)"', source))
    assert {"duplicate_turn_id", "stale", "busy"} <= words, words
    for word in sorted(words):
        assert "`turn/response`" in row(word) and "not this topic" in row(word), word


def test_the_agent_status_topic_is_said_to_be_read() -> None:
    """Presence is read since issue 32 (taskmanager/presence.py); on main the topic table said
    'not read by this build yet'."""
    said = [
        line
        for line in CONTRACT.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `P/agent/<capability_id>/status` |")
    ]
    assert len(said) == 1 and "not read" not in said[0] and "agent_offline" in said[0]
