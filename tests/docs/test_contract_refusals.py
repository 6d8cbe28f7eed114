"""docs/contract.md §2.15's refusal words say where each is sent, as the runtime does it.
`unknown_topic`: the runtime subscribes only to its own inbound topics, so a message on another
topic under P/ never reaches it; on main the page promised a refusal for "a topic under P/ the
runtime does not take", which nothing sends (a publish on `P/nonsense` got no answer)."""

from __future__ import annotations

from tests.docs.contract_doc import CONTRACT


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
