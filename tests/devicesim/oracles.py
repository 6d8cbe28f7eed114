"""The promises as checks, against what the peers sent (`sim.model`) and what the device put on
the wire, into the cloud, into its log and under its state dir.

Adding an oracle: a function `(sim, before) -> list[str]` (what is wrong; `before` is the wire
index where this step began) registered with `oracle(name, when)`: `step` checks after every
step, `quiet` after every quiet spell (what is owed has had its chance to happen)."""

from __future__ import annotations

import json
import os
import sqlite3
import unicodedata
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from a2a_common.clock import parse_iso
from a2a_common.jsonx import canonical

if TYPE_CHECKING:
    from tests.devicesim.run import Sim

TERMINAL_EVENTS = {"WORKFLOW_COMPLETED", "WORKFLOW_FAILED", "WORKFLOW_CANCELLED"}
TERMINAL_STATUS = ("completed", "failed", "cancelled", "rejected")


@dataclass(frozen=True)
class Violation:
    oracle: str
    detail: str


@dataclass(frozen=True)
class Oracle:
    name: str
    when: str
    check: Callable[[Sim, int], list[str]]


ORACLES: dict[str, Oracle] = {}


def oracle(name: str, when: str = "step") -> Callable[[Callable[[Sim, int], list[str]]], Any]:
    def register(fn: Callable[[Sim, int], list[str]]) -> Callable[[Sim, int], list[str]]:
        ORACLES[name] = Oracle(name, when, fn)
        return fn

    return register


SKIP = frozenset(filter(None, os.environ.get("A2A_SIM_SKIP", "").split(",")))


def _run(sim: Sim, before: int, when: str) -> list[Violation]:
    """Every oracle of `when`, but those A2A_SIM_SKIP names (comma-separated: to see what else
    a seed finds past a known break)."""
    out = []
    for item in ORACLES.values():
        if item.when != when or item.name in SKIP:
            continue
        sim.checks[item.name] += 1
        out += [Violation(item.name, d) for d in item.check(sim, before)]
    return out


def check_step(sim: Sim, before: int) -> list[Violation]:
    return _run(sim, before, "step")


def check_quiet(sim: Sim, before: int) -> list[Violation]:
    return _run(sim, before, "step") + _run(sim, before, "quiet")


def _text(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False)


# --- turns ----------------------------------------------------------------------------------
@oracle("turn_repeat_same_answer")
def turn_repeat_same_answer(sim: Sim, before: int) -> list[str]:
    """A repeat of a turn gets the answer the turn got (the same payload), while the device
    still remembers it: within `mqtt.dedupe_keep_days` of its take-in and no forget between (a
    forget takes the pair; a refused turn leaves no mark, so its id may come again with words
    taken). The keep counts from the take-in the answer came from (its dedupe mark's
    `seen_at`, read after the step that sent the answer), not from the answer: a repeat
    answered from the stored answer past the keep dates from the same take-in, and the device
    may drop the mark at any sweep after that; an answer whose mark is already gone binds
    nothing after it (seed 5302: a turn taken in, answered once more from its mark 15 days
    later and the mark pruned in that step, then reused with other words an hour later: a new
    turn, rightly)."""
    keep = timedelta(days=sim.settings.mqtt.dedupe_keep_days)
    forgets = [i for i, s in enumerate(sim.wire.sent) if s.topic.endswith("/memory/forget/result")]
    new = {s.body.get("turn_id") for s in sim.wire.topics("turn/response", before)}
    taken_in: dict[int, datetime | None] = sim.oracle_state.setdefault("turn_taken_in", {})
    out = []
    full = f"{sim.wire.root}/turn/response"
    for turn_id in sorted(t for t in new if isinstance(t, str)):
        first: tuple[int, Any] | None = None
        for index, sent in enumerate(sim.wire.sent):
            if sent.topic != full or sent.body.get("turn_id") != turn_id:
                continue
            if sent.body.get("status") == "rejected":
                continue
            if index not in taken_in:
                taken_in[index] = _taken_in(sim, turn_id)
            if first is not None:
                at, body = taken_in[first[0]], first[1]
                forgot = any(first[0] < f < index for f in forgets)
                if forgot or at is None or (sent.at is not None and sent.at - at > keep):
                    first = None
                elif _text(body) != _text(sent.body):
                    out.append(f"turn {turn_id} answered {_text(body)} then {_text(sent.body)}")
            if first is None:
                first = (index, sent.body)
    return out


def _taken_in(sim: Sim, turn_id: str) -> datetime | None:
    """When the device took the turn in: its dedupe mark's `seen_at` (None: no mark any more,
    pruned past the keep, or no process to ask)."""
    if sim.boot is None:
        return None
    rows = sim.rows("SELECT seen_at FROM inbox_seen WHERE key = ?", f"turn:{turn_id}")
    return parse_iso(rows[0][0]) if rows else None


@oracle("every_turn_answered", when="quiet")
def every_turn_answered(sim: Sim, _before: int) -> list[str]:
    answered = {s.body.get("turn_id") for s in sim.wire.topics("turn/response")}
    missing = sorted(sim.model.reached - answered)
    return [f"turn {t} reached the device and was never answered" for t in missing]


# --- safety ---------------------------------------------------------------------------------
@oracle("pui_answered_at_once")
def pui_answered_at_once(sim: Sim, before: int) -> list[str]:
    """A press that reached the device is answered, and the tasks it stops are sent their
    cancels, in the same step, storage or not (SPEC 2.4: safety does not wait for storage)."""
    out = []
    answered = {s.body.get("event_id") for s in sim.wire.topics("pui/result")}
    cancelled = {s.body.get("task_id") for s in sim.wire.sent if "/task/cancel/" in s.topic}
    refusing = sim.storage_until >= 0
    for event_id, step in sim.model.presses.items():
        if step != sim.step or event_id not in sim.model.pressed_reached:
            continue
        if event_id not in answered:
            out.append(f"PUI press {event_id} not answered (storage refusing: {refusing})")
        for task_id in sim.model.press_tasks.get(event_id, []):
            if task_id not in cancelled:
                out.append(f"PUI press {event_id}: {task_id} not sent its cancel ({refusing})")
    return out


@oracle("no_command_past_deadline")
def no_command_past_deadline(sim: Sim, before: int) -> list[str]:
    out = []
    for sent in sim.wire.sent[before:]:
        if "/task/command/" not in sent.topic or sent.at is None:
            continue
        if sent.body.get("safe_stop") is True:
            continue  # a stop never expires (SPEC 4.2): it goes whatever its deadline
        now = sent.at
        deadline = sent.body.get("deadline")
        if isinstance(deadline, str) and parse_iso(deadline) < now:
            out.append(f"{sent.body.get('task_id')} sent at {now} past its deadline {deadline}")
        if sent.expiry_s is not None and sent.expiry_s <= 0:
            out.append(f"{sent.body.get('task_id')} sent with expiry {sent.expiry_s}")
    return out


@oracle("cancel_confirmed_or_escalated", when="quiet")
def cancel_confirmed_or_escalated(sim: Sim, _before: int) -> list[str]:
    """Every cancel the agent never confirmed has its safe stop commanded — unless the agent
    restarted after the cancel and its new boot does not hold the task (a power cut, a new
    process: the move died with it, and the runtime ends it `agent_restarted`, no stop owed;
    docs/design.md "Never re-sent at start"; seed 834, 60 steps) — or its command never went
    out at all (a press while it waited unsent: no agent has the task, seed 20126)."""
    out = []
    stops = {s.body.get("task_id") for s in sim.wire.sent if "/task/command/" in s.topic}
    cancelled: dict[str, tuple[str, int]] = {}  # task_id -> (capability, wire index of 1st cancel)
    for index, sent in enumerate(sim.wire.sent):
        task_id = sent.body.get("task_id") if isinstance(sent.body, dict) else None
        if "/task/cancel/" in sent.topic and isinstance(task_id, str):
            cancelled.setdefault(task_id, (sent.topic.rsplit("/", 1)[-1], index))
    for task_id, (cap, at) in sorted(cancelled.items()):
        if task_id in sim.agents.ended or f"{task_id}~safe_stop" in stops:
            continue
        if task_id not in stops:
            continue  # its command never reached the broker: no agent has it (758fb6e)
        agent = sim.presence.agents.get(cap)
        if (
            agent is not None
            and any(since > at for since, _boot in agent.history)
            and task_id not in sim.presence.held(cap)
        ):
            continue  # its agent restarted since the cancel and forgot the task
        out.append(f"cancel of {task_id} never confirmed by its agent and no safe stop")
    return out


@oracle("timely_callback_counts")
def timely_callback_counts(sim: Sim, before: int) -> list[str]:
    """A step is not timed out for want of an answer its own agent gave in time: a callback
    for its attempt taken in (acknowledged) before its `ack_deadline` (issue 30 item 13: early
    callbacks burned the agent's seq numbers and the genuine ones were dropped as repeats)."""
    out = []
    full = f"{sim.wire.root}/workflow/event"
    for index in range(before, len(sim.wire.sent)):
        event = sim.wire.sent[index]
        if event.topic != full:
            continue
        body = event.body
        if body.get("status") != "TIMEOUT" or body.get("reason") != "ack_timeout":
            continue
        task_id = str(body.get("task_id"))
        commands = [
            s.body
            for s in sim.wire.sent
            if "/task/command/" in s.topic and s.body.get("task_id") == task_id
        ]
        if not commands or not isinstance(commands[-1].get("ack_deadline"), str):
            continue
        command = commands[-1]
        deadline = parse_iso(command["ack_deadline"])
        for mid, at, taken_at, callback in sim.model.callbacks.get(task_id, []):
            if (
                callback.get("attempt") == command.get("attempt")
                and at < deadline
                and taken_at < index
                and sim.wire.acked_at.get(mid, len(sim.wire.sent)) < index
            ):
                out.append(f"{task_id} timed out though its agent answered in time ({callback})")
                break
    return out


# --- workflows ------------------------------------------------------------------------------
@oracle("one_terminal_per_workflow")
def one_terminal_per_workflow(sim: Sim, before: int) -> list[str]:
    ends: dict[str, set[str]] = defaultdict(set)
    for s in sim.wire.topics("workflow/event"):
        if s.body.get("status") in TERMINAL_EVENTS:
            ends[str(s.body.get("workflow_id"))].add(str(s.body.get("status")))
    reports: dict[str, set[str]] = defaultdict(set)
    for body in sim.cloud.bodies("/workflow/events"):
        event = body.get("event") or {}
        if event.get("status") in TERMINAL_EVENTS:
            reports[
                str(body.get("workflow_id") or (body.get("workflow") or {}).get("workflow_id"))
            ].add(str(event.get("status")))
    out = [f"workflow {w} ended {sorted(e)}" for w, e in sorted(ends.items()) if len(e) > 1]
    out += [
        f"workflow {w} reported ended {sorted(e)}" for w, e in sorted(reports.items()) if len(e) > 1
    ]
    return out


@oracle("every_workflow_ends", when="quiet")
def every_workflow_ends(sim: Sim, _before: int) -> list[str]:
    """Every accepted workflow has ended after a quiet spell, unless it waits behind an alarm
    (SPEC 4.2: a resource whose cancel no agent confirmed stays held while the alarm stands)."""
    marks = ",".join("?" * len(TERMINAL_STATUS))
    rows = sim.rows(
        f"SELECT workflow_id, status FROM workflows WHERE status NOT IN ({marks})", *TERMINAL_STATUS
    )
    tm = sim.device.app.tm
    alarms = set(tm.alarms())
    fenced = {r for r, task_id in tm.board.fenced.items() if task_id in alarms}
    out = []
    for workflow_id, status in rows:
        wf = tm.board.workflows.get(workflow_id)
        behind = wf is not None and any(
            s.resource in fenced or f"{workflow_id}:{s.step_id}" in alarms for s in wf.steps
        )
        if not behind:
            out.append(f"workflow {workflow_id} still {status} after a quiet spell")
    return out


# --- sync -----------------------------------------------------------------------------------
@oracle("sync_once_in_order")
def sync_once_in_order(sim: Sim, _before: int) -> list[str]:
    """The cloud applied each write once, in the order the device made them (write ids are
    ULIDs: sortable by creation)."""
    log = sim.cloud.state.applied_log
    ids = [str(w.get("write_id")) for w in log]
    out = []
    if len(ids) != len(set(ids)):
        out.append("a write applied twice")
    if ids != sorted(ids):
        wrong = next(i for i in range(1, len(ids)) if ids[i] < ids[i - 1])
        out.append(f"writes applied out of order at {wrong}: {ids[wrong - 1]} then {ids[wrong]}")
    return out


@oracle("sync_drained", when="quiet")
def sync_drained(sim: Sim, _before: int) -> list[str]:
    left = sim.device.app.sync.pending()
    return [f"{left} sync writes still owed after a quiet spell"] if left else []


# --- privacy --------------------------------------------------------------------------------
@oracle("forgotten_nowhere")
def forgotten_nowhere(sim: Sim, before: int) -> list[str]:
    """After a forget returns: its markers in no outbound body, no cloud body, no log line;
    and (checked when it returns, and in a quiet spell) in no file under the state dir."""
    out = []
    for s in sim.wire.sent[before:]:
        request_id = s.body.get("request_id")
        if request_id in sim.model.forgets and s.body.get("status") == "ok":
            for marker in sim.model.forgets.pop(request_id):
                sim.model.forgotten.setdefault(marker, len(sim.wire.sent))
            out += _in_files(sim)
    if not sim.model.forgotten:
        return out
    wire_after = {m: i for m, i in sim.model.forgotten.items()}
    for marker, since in wire_after.items():
        for s in sim.wire.sent[max(since, before) :]:
            if marker in _text(s.body):
                out.append(f"forgotten {marker} sent on {s.topic}")
    cloud_new = [b for st, _p, b in sim.cloud.requests if st == sim.step]
    for body in cloud_new:
        text = _text(body)
        out += [f"forgotten {m} sent to the cloud" for m in sim.model.forgotten if m in text]
    return out


@oracle("forgotten_files", when="quiet")
def forgotten_files(sim: Sim, _before: int) -> list[str]:
    return _in_files(sim)


def _in_files(sim: Sim) -> list[str]:
    out = []
    state = sim.workdir / "state"
    for path in sorted(p for p in state.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for marker in sim.model.forgotten:
            if marker.encode() in data:
                out.append(f"forgotten {marker} still in {path.relative_to(sim.workdir)}")
    return out


@oracle("user_words_not_logged")
def user_words_not_logged(sim: Sim, _before: int) -> list[str]:
    lines, sim.tap.lines = sim.tap.lines, []
    out = []
    for line in lines:
        for marker in sim.model.markers:
            if marker in line:
                out.append(f"user words in a log line: {line[:120]}")
    return out


@oracle("sensitive_needs_consent")
def sensitive_needs_consent(sim: Sim, _before: int) -> list[str]:
    """A sensitive text is in no snapshot or sync body made while its category had no consent
    (made: the instant in its ULID `request_id`, the device's clock; a retry carries the body
    made before)."""
    out = []
    for st, path, body in sim.cloud.requests:
        if st != sim.step:
            continue
        request_id = str(body.get("request_id") or "")
        made = ulid_time(request_id) if len(request_id) == 26 else sim.clock.now()
        if sim.consented("health", made):
            continue
        shared: Any = (
            body.get("writes")
            if path.endswith("/sync")
            else ((body.get("voice_context") or {}).get("memory_snapshot"))
        )
        text = _text(shared)
        for marker in sim.model.sensitive:
            if marker in text:
                out.append(f"sensitive {marker} in a {path} body made at {made} without consent")
    return out


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid_time(ulid: str) -> datetime:
    millis = 0
    for ch in ulid[:10]:
        millis = millis * 32 + _CROCKFORD.index(ch)
    return datetime.fromtimestamp(millis / 1000, UTC)


# --- memory ---------------------------------------------------------------------------------
@oracle("one_confirmed_value_per_key")
def one_confirmed_value_per_key(sim: Sim, _before: int) -> list[str]:
    """A key holds at most one confirmed value — per person (SPEC §5.7: each person's key is
    their own; the household's is one more)."""
    rows = sim.rows(
        "SELECT key, person_id, count(*) FROM profile_items WHERE status = 'confirmed'"
        " GROUP BY key, person_id HAVING count(*) > 1"
    )
    return [f"profile key {k} of {p} has {n} confirmed values" for k, p, n in rows]


@oracle("confirmed_on_evidence")
def confirmed_on_evidence(sim: Sim, _before: int) -> list[str]:
    """Nothing is confirmed from one mention, and evidence outside the window never counts
    (SPEC §5.4): judged once, at the step an item becomes confirmed, on its evidence inside the
    window that ends on the confirmation's local day — suggestable without the confirming
    turn's own rows (an acceptance), or `auto_confirm_days` distinct days with them."""
    seen: set[tuple[str, str]] = sim.oracle_state.setdefault("confirmed", set())
    memory = sim.device.app.memory
    policy = memory.profile._policy
    out = []
    for item_id, key, confirmed_at in sim.rows(
        "SELECT item_id, key, confirmed_at FROM profile_items WHERE status = 'confirmed'"
    ):
        if (item_id, confirmed_at) in seen or not confirmed_at:
            continue
        seen.add((item_id, confirmed_at))
        day = date.fromisoformat(memory.profile.local_day(parse_iso(confirmed_at)))
        first = (day - timedelta(days=policy.window_days - 1)).isoformat()  # the oracle's own
        rows = sim.rows(
            "SELECT pair_id, day, created_at, kind FROM profile_evidence WHERE item_id = ?"
            " AND day >= ? AND created_at <= ?",
            item_id,
            first,
            confirmed_at,
        )
        # the confirming acceptance's own rows (a mention at the same instant still counts:
        # seed 911, a third mention and the acceptance with no time between)
        arriving = {
            pair
            for pair, _day, created, kind in rows
            if created == confirmed_at and kind == "suggestion_accepted"
        }
        before = [day for pair, day, _c, _k in rows if pair not in arriving]
        days = len({day for _p, day, _c, _k in rows})
        accepted = len(before) >= policy.min_mentions and len(set(before)) >= policy.min_days
        if not accepted and days < policy.auto_confirm_days:
            out.append(
                f"{key} ({item_id}) confirmed on {len(before)} mentions over "
                f"{len(set(before))} days in the window (and {days} days with its own)"
            )
    return out


@oracle("snapshot_deterministic")
def snapshot_deterministic(sim: Sim, _before: int) -> list[str]:
    """The same state and utterance give the same snapshot, byte for byte (the planner's
    cache and the turn's replay depend on it): at a step whose turn reached the cloud, its
    utterance's snapshot built twice (every step would cost a third of the run's speed)."""
    text = None
    for step, path, body in reversed(sim.cloud.requests):  # this step's, newest first
        if step != sim.step:
            break
        if path.endswith("/turn") and isinstance(body, dict):
            text = body.get("recognized_text")
            break
    if not isinstance(text, str):
        return []
    memory = sim.device.app.memory
    first, second = (_text(memory.snapshot_for(text)) for _ in range(2))
    return [] if first == second else [f"two snapshots for one utterance differ: {text!r}"]


@oracle("texts_are_nfc")
def texts_are_nfc(sim: Sim, _before: int) -> list[str]:
    """Keys and values are NFC wherever they came from (issue 30 item 7: one room, three keys)."""
    rows = sim.rows("SELECT key, value FROM profile_items")
    return [
        f"profile item {key!r} = {value!r} is not NFC or holds a format character"
        for key, value in rows
        if not all(_clean(str(t)) for t in (key, value))
    ]


def _clean(text: str) -> bool:
    return unicodedata.is_normalized("NFC", text) and not any(
        unicodedata.category(c) == "Cf" for c in text
    )


@oracle("snapshot_within_budget")
def snapshot_within_budget(sim: Sim, _before: int) -> list[str]:
    budget = sim.settings.memory.snapshot_budget_bytes
    out = []
    for st, path, body in sim.cloud.requests:
        if st == sim.step and path.endswith("/turn"):
            snap = (body.get("voice_context") or {}).get("memory_snapshot")
            size = len(canonical(snap)) if isinstance(snap, dict) else 0
            if size > budget:
                out.append(f"snapshot of {size} bytes past the budget {budget}")
    return out


# --- storage --------------------------------------------------------------------------------
@oracle("storage_intact", when="never")
def storage_intact(sim: Sim, _before: int) -> list[str]:
    """After every crash: the DB passes quick_check (run from `Sim.crash`)."""
    path = sim.settings.state_db_path
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        result = conn.execute("PRAGMA quick_check").fetchone()[0]
    return [] if result == "ok" else [f"quick_check: {result}"]


@oracle("one_writer")
def one_writer(sim: Sim, _before: int) -> list[str]:
    """Every row the runtime changed went through the app's own connection (the one door):
    the checkpointer's connection, the only other the process opens, changed none."""
    side = sim.device.app.checkpointer._conn
    changed = side.total_changes if side is not None else 0
    return [f"the checkpointer's connection changed {changed} rows"] if changed else []


@oracle("wal_bounded", when="quiet")
def wal_bounded(sim: Sim, _before: int) -> list[str]:
    wal = sim.settings.state_db_path.with_name(sim.settings.state_db_path.name + "-wal")
    bound = sim.settings.storage.max_wal_mb * 2**20
    size = wal.stat().st_size if wal.exists() else 0
    return [f"WAL {size} bytes past {bound}"] if size > bound else []
