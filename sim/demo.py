"""`a2a-edge demo`: the whole loop on one machine — a broker, the reference planner, the device
agents and the runtime in a temporary state dir — playing a scripted conversation:

1. a two-step room workflow with live progress; 2. a follow-up that uses memory; 3. a PUI
cancel; 4. the cloud going down (offline answers, the stop intent, the outbox growing);
5. the cloud coming back (replay); 6. the day 1–6 preference promotion on a simulated clock;
7. a vital measurement: the planner asks for consent, the simulated UI grants it on the robot
(`P/consent/request` -> `P/consent/result`), then the vital app runs.

It prints a timeline (Korean and English; coloured on a terminal), then a summary table, exits 0
and leaves nothing running. `--json` prints the events as JSON lines instead; `--keep` keeps
the state dir for `a2a-edge memory show` / `workflows trace` afterwards; `--verbose` shows the
runtime's log as it is written, between the timeline's lines (sim/demo_view.py).
"""

from __future__ import annotations

import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from sim import demo_cancel, demo_experience, demo_memory
from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.demo_view import LogTail, Timeline, print_summary
from sim.devices import DeviceAgents
from sim.embedded import embedded_broker
from sim.perception import PerceptionAgent
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess, write_config
from sim.world import World

DEVICE = "robot-001"
ROOT = f"a2a/{DEVICE}"
DAY_S = 86400
WALK_SCALE = 0.5  # scene 4's walk at half its real time: long enough to be stopped


class Demo:
    def __init__(
        self, work: Path, timeline: Timeline, broker: str = "auto", verbose: bool = False
    ) -> None:
        self.work = work
        self.broker = broker
        self.verbose = verbose
        self.say = timeline.line
        self.timeline = timeline
        self.turns: list[dict[str, Any]] = []
        self._seen = 0
        self._n = 0

    # --- the pieces -------------------------------------------------------------------------
    def start(self, stack: ExitStack) -> None:
        port, protocol, broker_name = stack.enter_context(_broker(self.work, self.broker))
        self.cloud = SimCloud().start()
        stack.callback(self.cloud.stop)
        self.offset_file = self.work / "clock-offset"
        self.offset_file.write_text("0")
        self.config = write_config(
            self.work / "config.toml",
            {
                "device_id": DEVICE,
                "state_dir": str(self.work / "state"),
                "mqtt": {
                    "port": port,
                    "protocol": protocol,
                    "reconnect_min_s": 0.5,
                    "reconnect_max_s": 2,
                },
                "cloud": {"base_url": self.cloud.url, "turn_deadline_s": 3.0},
                "sync": {"deadline_s": 1.0, "max_backoff_s": 1.0},
                "taskmanager": {"events_deadline_s": 1.0},
            },
        )
        self.runtime = RuntimeProcess(
            self.config, self.work, env={"A2A_CLOCK_OFFSET_FILE": str(self.offset_file)}
        )
        stack.callback(self.runtime.close)
        if self.verbose:
            stack.callback(LogTail(self.runtime.log_path, self.timeline).start().close)
        self.devices = DeviceAgents(port, ROOT, world=World(time_scale=0.05), protocol=protocol)
        stack.callback(self.devices.close)
        self.perception = PerceptionAgent(
            port, ROOT, protocol=protocol, clock_offset_s=self._offset_s
        )
        stack.callback(self.perception.close)
        self.probe = MqttProbe(
            port,
            [
                f"{ROOT}/turn/response",
                f"{ROOT}/workflow/event",
                f"{ROOT}/runtime/status",
                f"{ROOT}/consent/result",
            ],
            protocol=protocol,
            root=ROOT,
        )
        stack.callback(self.probe.close)
        self.runtime.start()
        self.probe.wait_for(f"{ROOT}/runtime/status", lambda b: b.get("state") == "online")
        self.say(
            "info",
            f"브로커 {broker_name} :{port}, 클라우드 {self.cloud.url}, 런타임 준비됨",
            f"broker {broker_name} on :{port} (MQTT {protocol}), sim cloud, runtime READY",
        )

    # --- conversation -------------------------------------------------------------------------
    def turn(
        self, text: str, speaker: tuple[str, str] | None = None, *, label: str = "사용자"
    ) -> dict[str, Any]:
        """One utterance; `speaker` (person id, how the demo names them) is who the voice
        front-end recognised (SPEC 5.7), none for the household (`label`: e.g. a guest)."""
        self._n += 1
        turn_id = f"demo-{self._n:02d}"
        who = speaker[1] if speaker else label
        self.say("user", f"{who} ▶ {text}", "", turn_id=turn_id)
        fields = {"speaker": {"id": speaker[0], "confidence": 0.95}} if speaker else {}
        reply: dict[str, Any] = self.probe.turn(turn_id, text, timeout_s=15, **fields)
        self.turns.append(reply)
        extra = f" [{reply['status']} {reply['route_family'] or '-'}"
        extra += f" {', '.join(reply['workflow_ids'])}]" if reply["workflow_ids"] else "]"
        self.say("robot", f"로봇   ◀ {reply['assistant_text']}", extra.strip(), reply=reply)
        return reply

    def follow(self, done: Callable[[dict[str, Any]], bool], timeout_s: float = 20.0) -> None:
        """Print workflow events as they come, until one satisfies `done`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            events = self.probe.messages(f"{ROOT}/workflow/event")
            for event in events[self._seen :]:
                self._seen += 1
                self._event(event)
                if done(event):
                    return
            time.sleep(0.05)
        raise TimeoutError("the demo waited too long for a workflow event")

    def _event(self, e: dict[str, Any]) -> None:
        step = e.get("step_id") or "workflow"
        progress = f" {int(e['progress'])}%" if e.get("progress") is not None else ""
        reason = f" ({e['reason']})" if e.get("reason") else ""
        self.say(
            "step",
            f"   {e['workflow_id']} {step}: {e['status']}{progress}{reason}",
            f"etag {e['etag']}, workflow {e['workflow_status']}",
            event=e,
        )

    def ended(self, workflow_id: str) -> Callable[[dict[str, Any]], bool]:
        return lambda e: (
            e.get("workflow_id") == workflow_id
            and e.get("step_id") is None
            and e.get("status", "").startswith("WORKFLOW_")
            and e["status"] != "WORKFLOW_ACCEPTED"
        )

    def status(self) -> dict[str, Any]:
        from edge.config.settings import load_settings
        from edge.views.state import sync_status

        return sync_status(load_settings(self.config))

    def _offset_s(self) -> float:
        return float(self.offset_file.read_text() or 0)

    def pass_days(self, days: float) -> None:
        self.offset_file.write_text(str(days * DAY_S))
        self.say("info", f"(시계: {days:g}일째)", f"(simulated clock: day {days:g})")

    def wait(self, what: Callable[[], bool], timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not what():
            if time.monotonic() > deadline:
                raise TimeoutError("the demo waited too long")
            time.sleep(0.1)

    # --- scenes ---------------------------------------------------------------------------------
    def play(self) -> None:
        self._rooms_and_pui()
        self._cloud_away_and_back()
        self._promotion()
        self._vital_with_consent()
        demo_experience.quiet_rest(self)
        demo_experience.rest_without_evidence(self)
        demo_memory.change_of_mind(self)
        demo_memory.relevance_under_a_small_budget(self)
        demo_cancel.unconfirmed_cancel(self)
        demo_memory.people_in_the_household(self)

    def _rooms_and_pui(self) -> None:
        self.say("scene", "1. 두 단계 방 워크플로", "a two-step room workflow")
        wf = self.turn("안방으로 가서 청정해줘")["workflow_ids"][0]
        self.follow(self.ended(wf))

        self.say("scene", "2. 기억을 쓰는 후속 요청", "a follow-up that uses memory")
        wf = self.turn("거기 다시 한 번 청정해줘")["workflow_ids"][0]
        self.follow(self.ended(wf))

        self.say("scene", "3. 물리 버튼(PUI) 취소", "a PUI cancel")
        wf = self.turn("오늘 너무 피곤해. 10분 동안 편하게 쉴 수 있게 도와줘.")["workflow_ids"][0]
        self.follow(
            lambda e: (
                e.get("workflow_id") == wf
                and e.get("status") == "RUNNING"
                and e.get("step_id") == "step_guide"
            )
        )
        self.say("info", "   [PUI] 취소 버튼을 눌렀어요", "the cancel button is pressed")
        self.devices.press_pui()
        self.follow(self.ended(wf))

    def _cloud_away_and_back(self) -> None:
        self.say("scene", "4. 클라우드 끊김", "the cloud goes down")
        self.devices.world.time_scale = WALK_SCALE  # a long walk, so there is something to stop
        wf = self.turn("현관으로 이동해")["workflow_ids"][0]
        self.follow(lambda e: e.get("workflow_id") == wf and e.get("status") == "RUNNING")
        self.say(
            "wait",
            "   (로봇이 현관으로 걸어가는 중: 첫 진행 보고까지 몇 초 걸려요)",
            "the robot walks to the hall; its first progress report takes a few seconds",
        )
        self.follow(lambda e: e.get("workflow_id") == wf and e.get("status") == "PROGRESS")
        self.cloud.set_faults(drop=True)
        self.turn("오늘 날씨 어때?")
        self.turn("멈춰")
        self.follow(self.ended(wf))
        self.devices.world.time_scale = 0.05
        pending = self.status()["pending"]
        self.say("info", f"   동기화 대기 중인 쓰기 {pending}건", f"{pending} writes wait to sync")

        self.say("scene", "5. 클라우드 복귀와 재전송", "the cloud comes back: replay")
        self.cloud.set_faults()
        self.turn("고마워")
        self.wait(lambda: self.status()["pending"] == 0)
        self.say(
            "info",
            f"   클라우드에 반영된 쓰기 {len(self.cloud.synced())}건",
            f"{len(self.cloud.synced())} writes applied by the cloud, each once",
        )

    def _promotion(self) -> None:
        self.say("scene", "6. 1–6일차 선호 학습", "day 1–6 preference promotion")
        for day, text in (
            (1, "안방 청정해줘"),
            (2, "안방 좀 깨끗하게 해줘"),
            (4, "잘 때는 안방 먼저 청정해"),
        ):
            self.pass_days(day)
            wf = self.turn(text)["workflow_ids"][0]
            self.follow(self.ended(wf))
        self.wait(lambda: self.status()["pending"] == 0)
        self.pass_days(5)
        self.turn("오늘 날씨 어때?")
        self.pass_days(6)
        wf = self.turn("응, 안방 청정 시작해")["workflow_ids"][0]
        self.follow(self.ended(wf))
        room = self.preferred_room()
        self.say(
            "info",
            f"   확정된 선호: preferred_room = {room}",
            f"confirmed profile item: preferred_room = {room}",
        )

    def _vital_with_consent(self) -> None:
        self.say(
            "scene", "7. 바이탈 측정: 로봇에서 동의", "a vital measurement: consent at the robot"
        )
        asked = self.turn("혈압 좀 재줘")
        if asked["workflow_ids"]:
            raise RuntimeError("the vital app was planned before the user consented")
        self.say(
            "info", "   [UI] 화면에서 '동의'를 눌렀어요", "the user taps 'agree' on the screen"
        )
        result = self.grant("capability:vital_app", ttl_s=600)
        held = ", ".join(g["scope"] for g in result["grants"])
        self.say(
            "info", f"   동의 기록됨: {held}", f"consent register holds: {held}", result=result
        )
        wf = self.turn("응, 동의했어")["workflow_ids"][0]
        self.follow(self.ended(wf))

    def grant(self, scope: str, ttl_s: float) -> dict[str, Any]:
        """What the robot's local UI does when the user agrees (SPEC §5.6)."""
        self._n += 1
        request_id = f"demo-consent-{self._n:02d}"
        body = {"request_id": request_id, "action": "grant", "scope": scope, "ttl_s": ttl_s}
        self.probe.publish(f"{ROOT}/consent/request", body)
        result: dict[str, Any] = self.probe.wait_for(
            f"{ROOT}/consent/result", lambda b: b.get("request_id") == request_id
        )
        if not result.get("ok"):
            raise RuntimeError(f"the consent grant was refused: {result.get('error')}")
        return result

    def preferred_room(self) -> str | None:
        from edge.config.settings import load_settings
        from edge.views.state import memory_snapshot

        snapshot, _ = memory_snapshot(load_settings(self.config))
        for item in snapshot["long_term"]["profile_items"]:
            if item["key"] == "preferred_room":
                return str(item["value"])
        return None

    def summary(self) -> dict[str, Any]:
        from edge.config.settings import load_settings
        from edge.views.state import memory_snapshot, workflows_list

        settings = load_settings(self.config)
        by_status: dict[str, int] = {}
        for wf in workflows_list(settings, limit=1000):
            by_status[wf["status"]] = by_status.get(wf["status"], 0) + 1
        turns: dict[str, int] = {}
        for reply in self.turns:
            turns[reply["status"]] = turns.get(reply["status"], 0) + 1
        _, size = memory_snapshot(settings)
        return {
            "turns": turns,
            "workflows": by_status,
            "writes_synced": len(self.cloud.synced()),
            "sync_pending": self.status()["pending"],
            "snapshot_bytes": size,
            "preferred_room": self.preferred_room(),
        }


@contextmanager
def _broker(work: Path, choice: str) -> Iterator[tuple[int, str, str]]:
    """Mosquitto when installed (`auto`); else the embedded broker, with the runtime on MQTT
    3.1.1 (amqtt speaks only that)."""
    try:
        if choice == "embedded":
            raise RuntimeError("the embedded broker was asked for")
        mosquitto = Mosquitto(work / "broker")
        mosquitto.start()
    except RuntimeError:
        if choice == "mosquitto":
            raise
        with embedded_broker() as port:
            yield port, "3.1.1", "embedded (amqtt)"
        return
    try:
        yield mosquitto.port, "5", "mosquitto"
    finally:
        mosquitto.stop()


def invocation() -> str:
    """How the user started this CLI, for the hints it prints: `.venv/bin/a2a-edge` when that
    is what ran (it is not on PATH after ./bootstrap.sh), else `a2a-edge`."""
    name = Path(sys.argv[0])
    if name.name == "a2a-edge" and shutil.which("a2a-edge") != str(name.absolute()):
        return str(name)
    return "a2a-edge"


def _device_logs(verbose: bool) -> None:
    """The device agents' warnings (a callback refused after a cancel, as expected) go with
    the runtime's log: shown with `--verbose`, else not printed over the timeline."""
    agents = logging.getLogger("a2a_agent")
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("        devices │ %(message)s"))
        agents.addHandler(handler)
    else:
        agents.addHandler(logging.NullHandler())
    agents.propagate = False


def run_demo(
    *, as_json: bool = False, keep: bool = False, verbose: bool = False, broker: str = "auto"
) -> int:
    work = Path(tempfile.mkdtemp(prefix="a2a-demo-"))
    timeline = Timeline(as_json=as_json)
    demo = Demo(work, timeline, broker, verbose=verbose)
    _device_logs(verbose)
    code = 0
    try:
        with ExitStack() as stack:
            demo.start(stack)
            demo.play()
            summary = demo.summary()
            code = 0 if demo.runtime.terminate() == 0 else 1
        print_summary(summary, timeline)
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        log = work / "runtime.log"
        if log.exists() and not verbose:
            sys.stderr.write(log.read_text(encoding="utf-8", errors="replace")[-3000:])
        code = 1
    finally:
        if keep:
            cli = invocation()
            print(
                f"state kept in {work}; try: {cli} memory show --config {work}/config.toml"
                f" (or {cli} workflows list, memory pairs, status)",
                file=sys.stderr if as_json else sys.stdout,
            )
        else:
            shutil.rmtree(work, ignore_errors=True)
    return code
