"""Korean routing of the reference planner (first cut: everything is chit-chat, `DEF`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Planned:
    route_family: str
    assistant_text: str


def route(text: str, device_context: dict[str, Any]) -> Planned:
    del device_context
    if "안녕" in text:
        return Planned("DEF", "안녕하세요! 무엇을 도와드릴까요?")
    return Planned("DEF", "네, 말씀 잘 들었어요.")
