"""`a2a-edge workflows | sync | inbox`: what the TaskManager runs, the sync outbox, the inbound
dead letters. The reads are in edge/cli/read.py; the two changes (cancel, replay) are here."""

from __future__ import annotations

import argparse
import time
from typing import Any

from edge.cli.change import ask, report
from edge.cli.kit import Subparsers, add_limit, command, group, positive_float, settings_of
from edge.cli.read import (
    cmd_inbox_dead,
    cmd_sync_status,
    cmd_workflows_list,
    cmd_workflows_trace,
)

PROGRESS_FROM = 100  # a replay of more writes than this shows a bar (on a terminal)


def cmd_workflows_cancel(args: argparse.Namespace) -> int:
    def text(result: dict[str, Any]) -> None:
        print(f"cancelled {', '.join(result['cancelled']) or args.workflow_id}")

    return report(args, ask(args, "workflow.cancel", {"workflow_id": args.workflow_id}), text)


def _follow(args: argparse.Namespace, total: int) -> int:
    """The service sends; follow its progress read-only until the outbox is empty or nothing
    moved for `--stall-s`. Returns what is still pending."""
    from edge.cli import out as cli_out
    from edge.views import state as views

    settings = settings_of(args)
    last, still = total, time.monotonic()
    with cli_out.progress(total, "sync replay", show=total > PROGRESS_FROM) as update:
        while (pending := views.sync_status(settings)["pending"]) and (
            time.monotonic() - still < args.stall_s
        ):
            if pending != last:
                last, still = pending, time.monotonic()
            update(total - pending, pending)
            time.sleep(0.2)
        update(total - pending, pending)
    return int(pending)


def cmd_sync_replay(args: argparse.Namespace) -> int:
    from edge.cli import out as cli_out
    from edge.views import state as views

    settings = settings_of(args)
    before = views.sync_status(settings)["pending"]
    payload = {"requeue_dead": args.requeue_dead}
    if before > PROGRESS_FROM:
        with cli_out.progress(before, "sync replay") as update:
            answer = ask(args, "sync.replay", payload, progress=update)
    else:
        answer = ask(args, "sync.replay", payload)
    took = answer.get("ok") and "sent" not in answer["result"]  # the service took it
    if took:
        answer["result"]["pending"] = _follow(args, answer["result"]["pending"])
    answer = _with_url(answer, settings.cloud.base_url, by="the service" if took else "here")

    def text(result: dict[str, Any]) -> None:
        cli_out.fields(result, title="sync replay:")

    return report(args, answer, text)


def _with_url(answer: dict[str, Any], url: str, *, by: str) -> dict[str, Any]:
    """Which cloud the writes went to (or would have), and who sent them: in the result and
    in the error, so that a replay that could not reach the cloud names the URL it tried."""
    result = {**answer.get("result", {}), "cloud_url": url, "sent_by": by}
    answer = {**answer, "result": result}
    if answer.get("error") and url not in str(answer["error"]):
        answer["error"] = f"{answer['error']} (cloud.base_url {url})"
    return answer


def _add_workflows(sub: Subparsers) -> None:
    workflows = group(sub, "workflows", "what the TaskManager runs and ran: list, trace, cancel")
    listing = command(workflows, "list", "workflows, newest first", cmd_workflows_list)
    add_limit(listing, 50, "workflows")
    trace = command(
        workflows,
        "trace",
        "one workflow from request to terminal evidence (exit 1 when unknown)",
        cmd_workflows_trace,
    )
    trace.add_argument("workflow_id", help="e.g. wf-00002 (ids: `workflows list`)")
    cancel = command(
        workflows,
        "cancel",
        "cancel an active workflow (through the service when it runs; exit 1 when none)",
        cmd_workflows_cancel,
    )
    cancel.add_argument("workflow_id", help="an active workflow's id")


def _add_sync(sub: Subparsers) -> None:
    sync = group(sub, "sync", "the outbox of writes the cloud should learn: status, replay")
    command(sync, "status", "pending, in flight, dead letters, cursor, warnings", cmd_sync_status)
    replay = command(
        sync,
        "replay",
        "send the outbox now (through the service when it runs, else from here)",
        cmd_sync_replay,
    )
    replay.add_argument("--requeue-dead", action="store_true", help="dead letters go again")
    replay.add_argument(
        "--stall-s",
        type=positive_float,
        default=30.0,
        metavar="S",
        help="stop following the service when nothing moved this long",
    )


def register(sub: Subparsers) -> None:
    _add_workflows(sub)
    _add_sync(sub)
    inbox = group(sub, "inbox", "inbound messages the runtime could not apply")
    dead = command(
        inbox,
        "dead",
        "dead letters: inbound messages refused after a handler failed, newest first",
        cmd_inbox_dead,
    )
    add_limit(dead, 100, "dead letters")
