"""The device's peers, seeded: the voice front-end, the PUI, the local UI, admin, perception,
the cloud's workflow pushes, and the device agents (who answer commands and cancels, late, twice,
out of order, on the wrong topic, with evidence that contradicts, or not at all).

Adding an input kind: a function `(sim) -> str | None` (what the step log says) registered in
`INPUTS` with a weight; it sends through `sim.send(kind, body)` and notes in `sim.model` what the
oracles need."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from a2a_common.clock import iso

if TYPE_CHECKING:
    from tests.devicesim.run import Sim

ROOMS = ["안방", "거실", "주방", "작은방"]
PLAIN = ["안녕", "오늘 날씨 어때?", "충전하러 가", "청정 멈춰", "멈춰", "고마워"]
ROOM_ASKS = ["{room}으로 가서 청정해줘", "{room} 청정해줘", "{room}으로 이동해"]
SENSITIVE = [
    "혈압약 먹을 시간이야 {m}",
    "병원 예약 번호는 {m}",
]  # health words (cache/lexicon.json)
MARKER = "표식{n}"  # a unique word the oracles follow (fixed width: none is a prefix of another)


@dataclass
class Scheduled:
    due: float  # monotonic
    kind: str
    payload: bytes
    note: str


def _dump(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


# --- the voice front-end --------------------------------------------------------------------
def turn(sim: Sim) -> str:
    rng = sim.rng
    sim.model.turn_no += 1
    turn_id = f"turn-{sim.seed}-{sim.model.turn_no}"
    pick = rng.random()
    marker = ""
    if pick < 0.35:
        text = rng.choice(ROOM_ASKS).format(room=rng.choice(ROOMS))
    elif pick < 0.55:
        text = rng.choice(PLAIN)
    elif pick < 0.75:
        marker = MARKER.format(n=f"{sim.seed}x{sim.model.turn_no:06d}")
        text = f"{rng.choice(PLAIN)} {marker}"
    elif pick < 0.85:
        marker = MARKER.format(n=f"{sim.seed}s{sim.model.turn_no:06d}")
        text = rng.choice(SENSITIVE).format(m=marker)
        sim.model.sensitive[marker] = sim.consented("health")
    elif pick < 0.95:
        text = unicodedata.normalize("NFD", rng.choice(ROOM_ASKS).format(room=rng.choice(ROOMS)))
    else:
        text = "가" * rng.choice([3999, 4001, 9000])  # at and past the bound
    body: dict[str, Any] = {"turn_id": turn_id, "recognized_text": text}
    if rng.random() < 0.3:
        body["session_id"] = f"s-{sim.model.turn_no // 5}"
    if rng.random() < 0.08:  # stale: spoken a minute ago (or in the future)
        body["spoken_at"] = iso(sim.clock.now() - timedelta(seconds=rng.choice([90, -90])))
    if marker:
        sim.model.markers[marker] = turn_id
    from tests.devicesim.people import speaker  # SPEC 5.7 (people.py: a cycle at import)

    body |= speaker(sim, marker)
    sim.model.turn_bodies[turn_id] = body
    sim.send("turn/request", body)
    return f"turn {turn_id} {text[:24]!r}{'…' if len(text) > 24 else ''}"


def repeat_turn(sim: Sim) -> str | None:
    if not sim.model.turn_bodies:
        return None
    turn_id = sim.rng.choice(sorted(sim.model.turn_bodies))
    body = sim.model.turn_bodies[turn_id]
    if sim.rng.random() < 0.3:  # the same id, other words
        sim.send("turn/request", {**body, "recognized_text": sim.rng.choice(PLAIN) + "!"})
        return f"turn {turn_id} reused with other words"
    sim.send("turn/request", body)
    return f"turn {turn_id} again"


def garbage(sim: Sim) -> str:
    kind = sim.rng.choice(["turn/request", "pui/event", "task/callback", "memory/forget"])
    raw = sim.rng.choice([b"{", b"[]", b'{"turn_id": 5}', "\ud800".encode("utf-8", "replace")])
    sim.send_raw(kind, raw)
    return f"garbage on {kind}"


# --- PUI, local UI, admin, perception, the cloud's pushes -----------------------------------
def pui(sim: Sim) -> str:
    sim.model.pui_no += 1
    event_id = f"p-{sim.seed}-{sim.model.pui_no}"
    body: dict[str, Any] = {"event_id": event_id, "kind": "cancel"}
    active = sim.active()
    if active and sim.rng.random() < 0.4:
        body["workflow_id"] = sim.rng.choice(active)
    target = body.get("workflow_id")
    running = [
        t for t, _cap in sim.cancelable_tasks() if target is None or t.startswith(f"{target}:")
    ]
    sim.model.presses[event_id] = sim.step
    sim.model.press_tasks[event_id] = running
    sim.send("pui/event", body)
    return f"pui {event_id} {body.get('workflow_id', '*')}"


def workflow(sim: Sim) -> str:
    sim.model.wf_no += 1
    wf = f"wf-{sim.seed}-{sim.model.wf_no}"
    room = sim.rng.choice(ROOMS)
    steps: list[dict[str, Any]] = [
        {
            "step_id": "step_move",
            "capability_id": "mobility",
            "operation_id": "move_to_room",
            "args": {"room": room},
            "depends_on": [],
            "timeout_s": sim.rng.choice([30, 120]),
        }
    ]
    if sim.rng.random() < 0.7:
        steps.append(
            {
                "step_id": "step_purify",
                "capability_id": "air_purifier",
                "operation_id": "start",
                "args": {"mode": "auto"},
                "depends_on": ["step_move"],
            }
        )
    if sim.rng.random() < 0.2:
        steps.append(
            {
                "step_id": "step_say",
                "capability_id": "speaker",
                "operation_id": "say",
                "args": {"text": "시작할게요"},
                "depends_on": [],
            }
        )
    body = {"workflow_id": wf, "plan_id": "room_clean", "steps": steps, "experience": None}
    sim.model.pushed[wf] = room
    sim.send("workflow/request", body)
    return f"workflow {wf} to {room} ({len(steps)} steps)"


def forget(sim: Sim) -> str:
    sim.model.forget_no += 1
    request_id = f"f-{sim.seed}-{sim.model.forget_no}"
    scope = sim.rng.choice(["pair", "pair", "session", "profile_key", "all"])
    body: dict[str, Any] = {"request_id": request_id, "scope": scope}
    markers: list[str] = []
    if scope == "pair":
        spoken = sim.spoken_markers()
        if not spoken:
            scope, body["scope"] = "all", "all"
        else:
            marker = sim.rng.choice(sorted(spoken))
            body["id"] = spoken[marker]
            markers = [marker]
    if scope == "session":
        body["id"] = f"s-{sim.rng.randint(0, max(0, sim.model.turn_no // 5))}"
    elif scope == "profile_key":
        key = "preferred_room"
        body["id"] = unicodedata.normalize("NFD", key) if sim.rng.random() < 0.3 else key
    if scope == "all":
        markers = sorted(sim.spoken_markers())
    sim.model.forgets[request_id] = markers
    sim.send("memory/forget", body)
    return f"forget {request_id} {scope} {body.get('id', '')} ({len(markers)} markers)"


def consent(sim: Sim) -> str:
    sim.model.consent_no += 1
    request_id = f"c-{sim.seed}-{sim.model.consent_no}"
    grant = sim.rng.random() < 0.6
    body: dict[str, Any] = {
        "request_id": request_id,
        "action": "grant" if grant else "revoke",
        "scope": "category:health",
    }
    if grant:
        body["ttl_s"] = sim.rng.choice([30, 600, 86400])
    sim.model.consents[request_id] = body
    sim.send("consent/request", body)
    return f"consent {request_id} {body['action']} {body.get('ttl_s', '')}"


def observation(sim: Sim) -> str:
    sim.model.obs_no += 1
    body = {
        "observation_id": f"o-{sim.seed}-{sim.model.obs_no}",
        "kind": sim.rng.choice(["noise", "person_seen", "air_quality"]),
        "observed_at": iso(sim.clock.now()),
        "scope": {"room": sim.rng.choice(ROOMS)},
        "value": {"level": sim.rng.randint(0, 100)},
    }
    sim.send("observation", body)
    return f"observation {body['observation_id']} {body['kind']}"


def admin(sim: Sim) -> str:
    sim.model.admin_no += 1
    request_id = f"a-{sim.seed}-{sim.model.admin_no}"
    command = sim.rng.choice(["workflow.cancel", "sync.replay", "consent.grant", "memory.revoke"])
    args: dict[str, Any] = {}
    if command == "workflow.cancel":
        active = sim.active()
        args = {"workflow_id": sim.rng.choice(active)} if active else {"all": True}
    elif command == "consent.grant":
        args = {"scope": "capability:vital_app", "ttl_s": 60}
    elif command == "memory.revoke":
        args = {"key": "preferred_room"}
    body: dict[str, Any] = {"request_id": request_id, "command": command, "args": args}
    if sim.rng.random() < 0.2:
        body["expires_at"] = iso(sim.clock.now() - timedelta(seconds=60))
    sim.send("admin/request", body)
    return f"admin {request_id} {command}"


def context(sim: Sim) -> str:
    body = {"current_room": sim.rng.choice(ROOMS), "battery": sim.rng.randint(5, 100)}
    sim.send("device/context", body)
    return f"context {body['current_room']} {body['battery']}"


# --- the agents -----------------------------------------------------------------------------
def early_callbacks(sim: Sim) -> str | None:
    """Callbacks for a step not dispatched yet (issue 30 item 13): refused, no mark left."""
    queued = sim.queued_tasks()
    if not queued:
        return None
    task_id, cap = sim.rng.choice(queued)
    for seq in range(1, 4):
        body = {"task_id": task_id, "seq": seq, "status": "RUNNING"}
        sim.send(sim.callback_topic(cap), body)
    sim.model.early.add(task_id)
    return f"early callbacks for {task_id}"


def wrong_capability(sim: Sim) -> str | None:
    """Another agent says a task is CANCELLED: one whose cancel waits for its confirmation when
    there is one (issue 30 item 2: it must not stand for the agent's own), else a running one."""
    watching = sim.cancels_watched()
    running = watching if watching and sim.rng.random() < 0.7 else sim.running_tasks()
    if not running:
        return None
    task_id, cap = sim.rng.choice(running)
    other = "speaker" if cap != "speaker" else "display"
    sim.send(sim.callback_topic(other), {"task_id": task_id, "seq": 90, "status": "CANCELLED"})
    return f"wrong-capability CANCELLED for {task_id} on {other}"


# input kinds added after the per-step stream: not drawn on `--stream one` (its seeds replay)
STEP_ONLY: set[str] = set()
INPUTS: dict[str, tuple[float, Callable[[Sim], str | None]]] = {
    "turn": (30, turn),
    "repeat_turn": (6, repeat_turn),
    "garbage": (2, garbage),
    "pui": (6, pui),
    "workflow": (10, workflow),
    "forget": (4, forget),
    "consent": (4, consent),
    "observation": (3, observation),
    "admin": (4, admin),
    "context": (3, context),
    "early_callbacks": (3, early_callbacks),
    "wrong_capability": (3, wrong_capability),
    "idle": (12, lambda sim: None),
}


class Agents:
    """Every capability's agent: reads its commands and cancels off the wire and answers on its
    own callback topic, as the seed says."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.cursor = 0
        self.seq: dict[str, int] = {}
        self.silent_until = -1.0  # monotonic
        self.pending: list[Scheduled] = []
        self.ended: set[str] = set()  # tasks whose own agent sent a terminal callback
        self.deaf: set[str] = set()  # capabilities whose agent is dead (devicesim/agents.py)

    def _next(self, task_id: str) -> int:
        self.seq[task_id] = self.seq.get(task_id, 0) + 1
        return self.seq[task_id]

    def _later(self, delay: float, cap: str, body: dict[str, Any], note: str) -> None:
        due = self.sim.clock.monotonic() + delay
        self.pending.append(Scheduled(due, self.sim.callback_topic(cap), _dump(body), note))

    def hear(self) -> None:
        sim, rng = self.sim, self.sim.rng
        new, self.cursor = sim.wire.sent[self.cursor :], len(sim.wire.sent)
        for sent in new:
            kind = sim.kind(sent.topic)
            if not kind.startswith(("task/command/", "task/cancel/")):
                continue
            cap = kind.rsplit("/", 1)[1]
            if cap in self.deaf:
                continue  # its process is gone: the command is lost with it
            body = sent.body
            task_id = str(body.get("task_id"))
            silent = sim.clock.monotonic() < self.silent_until
            if kind.startswith("task/cancel/"):
                if not silent and rng.random() < 0.85:
                    status = {"task_id": task_id, "status": "CANCELLED"}
                    self._later(rng.uniform(0.1, 4), cap, status, "cancelled")
                continue
            if silent:
                continue
            attempt = body.get("attempt")
            fate = rng.random()
            if task_id.endswith("~safe_stop"):
                self._later(
                    rng.uniform(0.1, 2), cap, {"task_id": task_id, "status": "COMPLETED"}, "stopped"
                )
                continue
            if fate < 0.08:
                continue  # silent
            self._later(
                rng.uniform(0.1, 2),
                cap,
                {"task_id": task_id, "status": "RUNNING", "attempt": attempt},
                "running",
            )
            done = rng.uniform(2, 20)
            if fate < 0.2:
                end: dict[str, Any] = {"task_id": task_id, "status": "FAILED", "reason": "blocked"}
            else:
                end = {"task_id": task_id, "status": "COMPLETED"}
                room = (body.get("args") or {}).get("room")
                if room is not None:
                    contradict = rng.random() < 0.1
                    there = rng.choice([r for r in ROOMS if r != room]) if contradict else room
                    end["evidence"] = {"arrived_room": there}
            self._later(done, cap, {**end, "attempt": attempt}, "end")
            if rng.random() < 0.1:  # the end again (a duplicate)
                self._later(done + rng.uniform(0, 3), cap, {**end, "attempt": attempt}, "dup")

    def due(self) -> list[Scheduled]:
        """Callbacks due now, seq numbered in the order they go (a duplicate keeps its own)."""
        now = self.sim.clock.monotonic()
        ready = sorted((p for p in self.pending if p.due <= now), key=lambda p: p.due)
        self.pending = [p for p in self.pending if p.due > now]
        out = []
        for item in ready:
            body = json.loads(item.payload)
            task_id = body["task_id"]
            if item.note == "dup":
                body["seq"] = self.seq.get(task_id, 1)
            else:
                body["seq"] = self._next(task_id)
            body = {k: v for k, v in body.items() if v is not None}
            if body.get("status") in ("COMPLETED", "FAILED", "CANCELLED"):
                self.ended.add(task_id)
            out.append(Scheduled(item.due, item.kind, _dump(body), item.note))
        return out
