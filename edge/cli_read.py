"""The CLI's read commands: views of the state DB opened read-only (safe while the service
runs), printed as text or, with `--json`, as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edge.config import Settings, load_settings


def settings_of(args: argparse.Namespace) -> Settings:
    return load_settings(Path(args.config) if args.config else None)


def print_value(value: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(value, ensure_ascii=False, indent=None))
        return
    if isinstance(value, dict):
        for key, item in value.items():
            shown = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
            print(f"{key:>16}: {shown}")


def cmd_status(args: argparse.Namespace) -> int:
    from edge import views

    print_value(views.status(settings_of(args)), args.json)
    return 0


def cmd_memory_show(args: argparse.Namespace) -> int:
    from edge import views

    shown = views.memory_show(settings_of(args))
    if args.json:
        print_value(shown, True)
        return 0
    print_value({k: v for k, v in shown.items() if k != "profile_items"}, False)
    print("   profile items:")
    for item in shown["profile_items"]:
        value = json.dumps(item["value"], ensure_ascii=False)
        print(
            f"  - {item['key']} = {value} [{item['status']}] category={item['category']} "
            f"confidence={item['confidence']} relevance={item['relevance_score']} "
            f"mentions={item['mentions']}"
        )
        for name, ids in item["sources"].items():
            if ids:
                print(f"      source_{name}_ids: {', '.join(ids)}")
    return 0


def cmd_memory_snapshot(args: argparse.Namespace) -> int:
    from edge import views

    snapshot, size = views.memory_snapshot(settings_of(args))
    if args.json:
        print(json.dumps({"bytes": size, "snapshot": snapshot}, ensure_ascii=False))
    else:
        print(json.dumps(snapshot, ensure_ascii=False, indent=2))
        print(f"# {size} bytes of canonical JSON")
    return 0


def cmd_workflows_list(args: argparse.Namespace) -> int:
    from edge import views

    rows = views.workflows_list(settings_of(args), args.limit)
    header = f"{'workflow':<28} {'status':<12} {'etag':>4}  {'source':<8} {'created':<24} reason"
    return print_rows(
        rows,
        args.json,
        header,
        lambda row: (
            f"{row['workflow_id']:<28} {row['status']:<12} {row['etag']:>4}  "
            f"{row['source']:<8} {row['created_at']:<24} {row['reason'] or ''}"
        ),
    )


def print_rows(
    rows: list[dict[str, Any]], as_json: bool, header: str, line: Callable[[dict[str, Any]], str]
) -> int:
    """A listing: JSON with `--json`, else a header and one line a row."""
    if as_json:
        print_value(rows, True)
        return 0
    print(header)
    for row in rows:
        print(line(row))
    return 0


def _timeline_line(entry: dict[str, Any]) -> str:
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
    return f"{entry['ts']} {etag:>4} {what} {extra}".rstrip()


def cmd_workflows_trace(args: argparse.Namespace) -> int:
    from edge import views

    trace = views.workflow_trace(settings_of(args), args.workflow_id)
    if trace is None:
        print(f"a2a-edge: no workflow {args.workflow_id}", file=sys.stderr)
        return 1
    if args.json:
        print_value(trace, True)
        return 0
    wf = trace["workflow"]
    print(
        f"workflow {wf['workflow_id']}  status {wf['status']}  etag {wf.get('etag', 1)}  "
        f"plan {wf.get('plan_id') or '-'}  turn {wf.get('turn_id') or '-'}"
    )
    if wf.get("experience"):
        print(
            f"experience {wf['experience'].get('experience_id')}: "
            f"{wf['experience'].get('goal_summary', '')}"
        )
    for entry in trace["timeline"]:
        print("  " + _timeline_line(entry))
    return 0


def cmd_inbox_dead(args: argparse.Namespace) -> int:
    from edge import views

    rows = views.inbox_dead(settings_of(args), args.limit)
    header = f"{'id':>6}  {'received':<26} {'bytes':>6}  {'topic':<40} error"
    return print_rows(
        rows,
        args.json,
        header,
        lambda row: (
            f"{row['id']:>6}  {row['received_at']:<26} {row['bytes']:>6}  {row['topic']:<40}"
            f" {row['error']}"
        ),
    )


def cmd_sync_status(args: argparse.Namespace) -> int:
    from edge import views

    print_value(views.sync_status(settings_of(args)), args.json)
    return 0
