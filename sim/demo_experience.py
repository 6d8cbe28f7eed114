"""The demo's Experience scenes (seed 003): a rest bound to its goal contract, a noise observation
the supervisor decides on, the criteria met; then the same rest with a purifier that proves
nothing: `evidence_missing` -> a decision -> a bounded end with the unmet criterion."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.devices import Behavior

if TYPE_CHECKING:
    from sim.demo import Demo

REST = "오늘 너무 피곤해. 10분 동안 편하게 쉴 수 있게 도와줘."
REPORTS = "/v1/a2a/workflow/events"
ROOT = "a2a/robot-001"


def _is(wf: str, step: str | None, status: str) -> Any:
    return lambda e: (
        e.get("workflow_id") == wf and e.get("step_id") == step and e.get("status") == status
    )


def _rest_passes(demo: Demo, wf: str) -> None:
    """The ten minutes go by on the runtime's clock; an air-quality reading wakes its timer."""
    started = _is(wf, "step_rest", "RUNNING")
    if not any(started(e) for e in demo.probe.messages(f"{ROOT}/workflow/event")):
        demo.follow(started)
    offset = float(demo.offset_file.read_text() or 0)
    demo.offset_file.write_text(str(offset + 601))
    demo.say("info", "   (시계: 10분 뒤)", "(simulated clock: ten minutes later)")
    demo.perception.air_quality(8, room=demo.devices.world.current_room)


def _decisions(demo: Demo, wf: str) -> None:
    """What the supervisor was asked and decided, from the workflow's trace (bounded)."""
    from edge.config.settings import load_settings
    from edge.views.state import workflow_trace

    shown = workflow_trace(load_settings(demo.config), wf) or {"timeline": []}
    asked = [e.get("status") for e in shown["timeline"] if e["kind"] == "decision_requested"]
    decided = [e.get("decision") or "none" for e in shown["timeline"] if e["kind"] == "decision"]
    pairs = ", ".join(f"{a} → {d}" for a, d in zip(asked, decided, strict=False)) or "-"
    demo.say("info", f"   슈퍼바이저 결정: {pairs}", f"supervisor decisions: {pairs}")


def _ended_reports(demo: Demo, wf: str) -> list[dict[str, Any]]:
    return [
        r["body"]["event"]
        for r in demo.cloud.requests(REPORTS)
        if r["body"]["workflow_id"] == wf and r["body"]["event"]["status"].startswith("WORKFLOW_")
    ]


def _criteria(demo: Demo, wf: str) -> dict[str, Any]:
    _decisions(demo, wf)
    # the terminal report is posted after the commit that published the workflow's end
    demo.wait(lambda: bool(_ended_reports(demo, wf)))
    ended = _ended_reports(demo, wf)
    criteria: dict[str, Any] = ended[-1].get("criteria", {}) if ended else {}
    met, unmet = ", ".join(criteria.get("met", [])), ", ".join(criteria.get("unmet", []))
    demo.say(
        "info",
        f"   성공 기준 충족: {met or '-'} / 미충족: {unmet or '-'}",
        f"criteria met: {met or '-'}; unmet: {unmet or '-'}",
        criteria=criteria,
    )
    return criteria


def quiet_rest(demo: Demo) -> None:
    demo.say("scene", "8. 경험 워크플로: 조용한 휴식", "an experience: a quiet rest (seed 003)")
    wf = demo.turn(REST)["workflow_ids"][0]
    demo.follow(_is(wf, "step_guide", "COMPLETED"))
    room = demo.devices.world.current_room
    demo.say("info", f"   [센서] {room}에 소음 68 dB", f"perception: 68 dB of noise in {room}")
    demo.perception.noise(68, room=room, requires_cloud_decision=True)
    demo.follow(_is(wf, None, "OBSERVATION"))
    demo.follow(lambda e: e.get("workflow_id") == wf and e.get("status") == "COMPLETED"
                and str(e.get("step_id", "")).startswith("step_soothe"))  # fmt: skip
    _rest_passes(demo, wf)
    demo.follow(demo.ended(wf))
    _criteria(demo, wf)


def rest_without_evidence(demo: Demo) -> None:
    demo.say(
        "scene",
        "9. 증거 없는 완료 주장",
        "a completion claimed without evidence: evidence_missing",
    )
    key = "air_purifier.set_mode"
    before = demo.devices.behaviors.get(key)
    demo.devices.behaviors[key] = Behavior("complete", evidence={})
    try:
        wf = demo.turn(REST)["workflow_ids"][0]
        demo.follow(_is(wf, "step_quiet", "FAILED"))
        _rest_passes(demo, wf)
        demo.follow(demo.ended(wf))
    finally:
        if before is None:
            demo.devices.behaviors.pop(key, None)
        else:
            demo.devices.behaviors[key] = before
    _criteria(demo, wf)
