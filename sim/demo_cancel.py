"""The demo's unconfirmed-cancel scene (SPEC §4.2): the mobility agent hangs on a cancel, the
robot sends it again, escalates to `mobility.stop`, the alarm shows on `P/runtime/status`, and it
clears when the agent comes back and confirms."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.devices import Behavior

if TYPE_CHECKING:
    from sim.demo import Demo

ROOT = "a2a/robot-001"


def _alarm(demo: Demo, shown: bool) -> dict[str, Any]:
    body: dict[str, Any] = demo.probe.wait_for(
        f"{ROOT}/runtime/status",
        lambda b: b.get("state") == "online" and ("alarm" in b) == shown,
        timeout_s=10,
    )
    return body


def unconfirmed_cancel(demo: Demo) -> None:
    demo.say("scene", "12. 확인되지 않은 취소", "a cancel nobody confirms")
    behaviors = demo.devices.behaviors
    behaviors["mobility.move_to_room"] = Behavior("hung")
    behaviors["mobility.stop"] = Behavior("silent")
    try:
        wf = demo.turn("현관으로 이동해")["workflow_ids"][0]
        demo.follow(lambda e: e.get("workflow_id") == wf and e.get("status") == "RUNNING")
        demo.say(
            "info",
            "   [PUI] 이동 중에 취소 버튼을 눌렀어요",
            "the cancel button is pressed mid-walk",
        )
        demo.devices.press_pui()
        demo.follow(demo.ended(wf))
        demo.say(
            "wait",
            "   (이동 장치가 응답하지 않아요: 취소를 다시 보내고 안전 정지로 넘어가요)",
            "the mobility agent hangs: the cancel goes again, then the safe stop",
        )
        demo.follow(
            lambda e: e.get("workflow_id") == wf and e.get("status") == "CANCEL_UNCONFIRMED"
        )
        alarm = _alarm(demo, True)["alarm"]
        demo.say(
            "info",
            f"   경보: 취소 미확인 {', '.join(alarm['task_ids'])} → mobility.stop",
            "alarm on P/runtime/status; mobility.stop commanded",
            alarm=alarm,
        )
        demo.say("info", "   [장치] 이동 장치가 돌아왔어요", "the mobility agent comes back")
        demo.devices.release(f"{wf}:step_move")
        demo.follow(lambda e: e.get("workflow_id") == wf and e.get("status") == "CANCEL_CONFIRMED")
        _alarm(demo, False)
        demo.say("info", "   경보 해제: 정지가 확인됐어요", "alarm cleared: the stop is confirmed")
    finally:
        behaviors.pop("mobility.move_to_room", None)
        behaviors.pop("mobility.stop", None)
