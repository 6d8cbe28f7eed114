"""The CLI's read commands for workflows, the sync outbox and the inbox: views of the state DB
opened read-only (safe while the service runs), printed as tables or, with `--json`, as JSON.
(`status` is in edge/cli/service.py, the memory views in edge/cli/memory.py.)"""

from __future__ import annotations

import argparse
import json
from typing import Any

from edge.cli.kit import EXIT_OK, NothingMatched, settings_of


def cmd_workflows_list(args: argparse.Namespace) -> int:
    from edge.cli import out as cli_out
    from edge.views import state as views

    rows = views.workflows_list(settings_of(args), args.limit)
    if args.json:
        cli_out.emit_json(rows)
        return EXIT_OK
    columns = ("workflow_id", "status", "etag", "source", "created_at", "reason")
    cli_out.table(columns, [[row.get(c) for c in columns] for row in rows], right=("etag",))
    return EXIT_OK


def _timeline_row(entry: dict[str, Any]) -> list[Any]:
    kind = entry["kind"]
    etag = f"#{entry['etag']}" if entry.get("etag") is not None else ""
    rest = {k: v for k, v in entry.items() if k not in ("ts", "etag", "kind")}
    if kind == "event":
        what = f"{rest.pop('step_id', '-') or '-'} {rest.pop('status', '')}"
    else:
        what = kind
    extra = " ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)}"
        for k, v in rest.items()
        if v not in (None, [], {})
    )
    return [entry["ts"], etag, what, extra]


def cmd_workflows_trace(args: argparse.Namespace) -> int:
    from edge.cli import out as cli_out
    from edge.views import state as views

    trace = views.workflow_trace(settings_of(args), args.workflow_id)
    if trace is None:
        raise NothingMatched(f"no workflow {args.workflow_id}")
    if args.json:
        cli_out.emit_json(trace)
        return EXIT_OK
    wf = trace["workflow"]
    print(
        f"workflow {wf['workflow_id']}  status {wf['status']}  etag {wf.get('etag', 1)}  "
        f"plan {wf.get('plan_id') or '-'}  turn {wf.get('turn_id') or '-'}"
    )
    state = wf.get("experience_state")
    if wf.get("experience"):
        print(
            f"experience {wf['experience'].get('experience_id')} [{state or '-'}]: "
            f"{wf['experience'].get('goal_summary', '')}"
        )
    elif state:  # refused or off: the reason is in the timeline (experience_activation)
        print(f"experience [{state}]: {wf.get('experience_refusal') or 'not activated'}")
    rows = [_timeline_row(entry) for entry in trace["timeline"]]
    cli_out.table(("ts", "etag", "what", "details"), rows, right=("etag",))
    return EXIT_OK


def cmd_inbox_dead(args: argparse.Namespace) -> int:
    from edge.cli import out as cli_out
    from edge.views import state as views

    rows = views.inbox_dead(settings_of(args), args.limit)
    if args.json:
        cli_out.emit_json(rows)
        return EXIT_OK
    columns = ("id", "received_at", "bytes", "topic", "error")
    cli_out.table(columns, [[row[c] for c in columns] for row in rows], right=("id", "bytes"))
    return EXIT_OK


def cmd_sync_status(args: argparse.Namespace) -> int:
    from edge.cli import out as cli_out
    from edge.views import state as views

    shown = views.sync_status(settings_of(args))
    if args.json:
        cli_out.emit_json(shown)
    else:
        cli_out.fields(shown)
    return EXIT_OK
