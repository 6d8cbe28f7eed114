"""SQL statements per inbound event (issue 36): what one workflow request, one callback that
ends a step and dispatches its dependant, one PUI cancel (and its confirmation) cost the state
DB, writes (INSERT/UPDATE/DELETE) apart, and what deleting the outbox rows they wrote costs once
the broker PUBACKed them. Prints figures; asserts nothing.

The device app runs in this process (`edge.wiring.build_app`, as tests/edge/test_app.py does):
a real state DB under `--dir`, a recording wire that PUBACKs every message it is handed, the
cloud an `httpx.MockTransport`. Each round: a two-step workflow is pushed, its move RUNNING
then COMPLETED (the purifier is dispatched), then every other round a PUI cancel and the
purifier's CANCELLED confirmation, else the purifier's COMPLETED (the workflow ends). After each
event every message handed is PUBACKed and one unit reaps the rows (what the heartbeat's commit
does): counted apart as `reap`. `trace` and `outbox`: the `workflow_trace` and `mqtt_outbox`
rows each event inserts. Run twice: with the trace written a row per entry (as before issue 36)
and a row per change (now); and what writing the `workflow/event` messages of one change as one
outbox row would save (measured only: not done, docs/design.md says why). Statements: every SQL
statement the app's connection ran (`set_trace_callback`), the transaction's own
BEGIN/COMMIT/SAVEPOINT included.

    .venv/bin/python -m bench.statements [--rounds 40] [--dir PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest.mock import patch

import httpx

from a2a_common.clock import ManualClock
from bench.benchlib import record
from edge.app.device import DeviceApp
from edge.channel.topics import Arrival, PuiEventMsg, TaskCallbackMsg, WorkflowRequestMsg
from edge.config.settings import Secrets, Settings
from edge.wiring import build_app, open_db
from taskmanager.store import WorkflowStore

ROOT = "a2a/robot-bench"
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")
TABLES = ("workflow_trace", "mqtt_outbox")  # rows inserted, shown apart
KINDS = (
    "workflow request",
    "callback RUNNING",
    "callback COMPLETED -> dependant",
    "callback COMPLETED -> workflow end",
    "pui cancel",
    "cancel confirmation",
)


def two_steps(n: int) -> dict[str, Any]:
    return {
        "workflow_id": f"wf-{n:04d}",
        "steps": [
            {"step_id": "move", "capability_id": "mobility", "operation_id": "move_to_room",
             "args": {"room": "안방"}, "timeout_s": 120},
            {"step_id": "purify", "capability_id": "air_purifier", "operation_id": "start",
             "args": {"mode": "auto"}, "depends_on": ["move"]},
        ],
    }  # fmt: skip


class Wire:
    """Takes what the outbox hands; every message is PUBACKed by `puback()`."""

    def __init__(self) -> None:
        self.mids: list[int] = []
        self.sent = 0

    def publish(
        self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False,
        expiry_s: int | None = None,
    ) -> int:  # fmt: skip
        self.sent += 1
        self.mids.append(self.sent)
        return self.sent


def cloud(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"decision": None, "accepted": [], "acked": []})


class Counts:
    def __init__(self) -> None:
        self.statements: Counter[str] = Counter()
        self.writes: Counter[str] = Counter()
        self.events: Counter[str] = Counter()
        self.rows: Counter[tuple[str, str]] = Counter()  # (kind, table) -> rows inserted
        self.kind = ""

    def __call__(self, sql: str) -> None:
        if self.kind:
            self.statements[self.kind] += 1
            self.writes[self.kind] += sql.lstrip().upper().startswith(WRITES)
            for table in TABLES:
                self.rows[self.kind, table] += sql.startswith(f"INSERT INTO {table} ")
            event = sql.startswith("INSERT INTO mqtt_outbox ") and "/workflow/event'" in sql
            self.rows[self.kind, "events"] += event


def run(work: Path, rounds: int) -> tuple[Counts, int]:
    settings = Settings.model_validate({"device_id": "robot-bench", "state_dir": str(work)})
    clock = ManualClock(datetime(2026, 6, 24, 20, 0, tzinfo=UTC))
    app: DeviceApp = build_app(
        settings, Secrets(), db=open_db(settings), clock=clock, live=False,
        transport=httpx.MockTransport(cloud),
    )  # fmt: skip
    app.tm.reload()
    wire = Wire()
    app.attach(wire)
    counts = Counts()
    app.memory.db.conn.set_trace_callback(counts)

    def event(kind: str, fn: Any, *args: Any) -> None:
        counts.kind = kind
        fn(*args)
        counts.events[kind] += 1
        counts.kind = f"{kind} / reap"
        for mid in wire.mids:
            app.on_published(mid)
        wire.mids.clear()
        with app.unit():
            app.reap_rows()
        counts.kind = ""
        clock.advance(1)

    def arrival(suffix: str) -> Arrival:
        return Arrival(f"{ROOT}/{suffix}", time.perf_counter())

    def callback(task_id: str, seq: int, status: str) -> None:
        msg = TaskCallbackMsg(task_id=task_id, seq=seq, status=status)
        app.take_callback(msg, arrival("task/callback"))

    for n in range(rounds):
        wf = f"wf-{n:04d}"
        request = WorkflowRequestMsg.model_validate(two_steps(n))
        event("workflow request", app.take_workflow, request, arrival("workflow/request"))
        event("callback RUNNING", callback, f"{wf}:move", 1, "RUNNING")
        event("callback COMPLETED -> dependant", callback, f"{wf}:move", 2, "COMPLETED")
        if n % 2:
            press = PuiEventMsg(event_id=f"e{n}", kind="cancel")
            event("pui cancel", app.take_pui, press, arrival("pui/event"))
            event("cancel confirmation", callback, f"{wf}:purify", 1, "CANCELLED")
        else:
            event("callback COMPLETED -> workflow end", callback, f"{wf}:purify", 1, "COMPLETED")
    app.memory.db.conn.set_trace_callback(None)
    traces = int(app.memory.db.execute("SELECT count(*) FROM workflow_trace").fetchone()[0])
    assert not app.tm.active_ids(), "a workflow did not end"
    asyncio.run(app.close())
    return counts, traces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--dir", type=Path, default=None, help="where the state DB goes")
    args = parser.parse_args()
    for per_entry in (True, False):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            if per_entry:  # before issue 36: every trace entry a row of its own
                with patch.object(WorkflowStore, "change", lambda _self: nullcontext()):
                    counts, traces = run(Path(tmp), args.rounds)
            else:
                counts, traces = run(Path(tmp), args.rounds)
        show(counts, traces, args.rounds, "_per_entry" if per_entry else "")


def show(counts: Counts, traces: int, rounds: int, suffix: str) -> None:
    how = "a trace row per entry (before)" if suffix else "a trace row per change (now)"
    print(f"SQL statements per inbound event ({rounds} rounds, {how}), writes apart")
    print(
        f"{'event':<36} {'statements':>10} {'writes':>7} {'trace':>6} {'outbox':>7}"
        f" {'reap':>5} {'reap w':>7}"
    )
    figures: dict[str, float] = {}
    for kind in KINDS:
        n = counts.events[kind]
        if not n:
            continue
        reap = f"{kind} / reap"
        row = (counts.statements[kind] / n, counts.writes[kind] / n)
        reaped = (counts.statements[reap] / n, counts.writes[reap] / n)
        trace, outbox = (counts.rows[kind, table] / n for table in TABLES)
        print(
            f"{kind:<36} {row[0]:>10.1f} {row[1]:>7.1f} {trace:>6.1f} {outbox:>7.1f}"
            f" {reaped[0]:>5.1f} {reaped[1]:>7.1f}"
        )
        key = kind.replace(" -> ", "_").replace(" ", "_") + suffix
        events = counts.rows[kind, "events"] / n
        # the events of one change as one outbox row: one INSERT and one reaped DELETE fewer
        # per event past the first (not done: measured only)
        figures[f"{key}_outbox_grouping_would_save"] = round(2 * max(0.0, events - 1), 2)
        figures[f"{key}_statements"] = round(row[0], 2)
        figures[f"{key}_writes"] = round(row[1], 2)
        figures[f"{key}_reap_statements"] = round(reaped[0], 2)
        figures[f"{key}_trace_rows"] = round(trace, 2)
        figures[f"{key}_outbox_rows"] = round(outbox, 2)
    rows = traces / rounds
    print(f"workflow_trace rows per workflow: {rows:.1f}")
    figures[f"trace_rows_per_workflow{suffix}"] = round(rows, 2)
    saved = [f"{v:.0f}" for k, v in figures.items() if k.endswith("would_save")]
    print(f"events of a change as one outbox row would save, per event above: {' '.join(saved)}")
    for key, value in figures.items():
        record("statements", key, value)
    print()


if __name__ == "__main__":
    main()
