"""`a2a-edge run | status | config check | db backup`: the service and its files.

`run`'s import graph stays lean: nothing here imports `rich` (edge/cli/out.py does, lazily,
when a command prints)."""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import os
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from a2a_common.sqlite import StorageError
from edge.cli.kit import (
    EXIT_NOT_RUNNING,
    EXIT_OK,
    Subparsers,
    command,
    group,
    settings_of,
)
from edge.config.settings import load_secrets
from edge.host import statelock
from edge.host.clock import runtime_clock
from edge.host.log import configure
from edge.host.malloc import fix_thresholds
from edge.host.permissions import check_permissions


def cmd_run(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    if args.accept_new_device_id:
        settings = settings.model_copy(update={"accept_new_device_id": True})
    secrets = load_secrets(settings)
    configure(settings.log.level, settings.log.format)
    faulthandler.enable()  # a fatal signal (SIGBUS from a mapped file) leaves its stack in the log
    fix_thresholds()  # glibc's heap gives its free top back (edge/host/malloc.py)
    from edge.wiring import build_runtime

    clock = runtime_clock(os.environ)
    with statelock.for_service(settings.state_db_path.parent):  # held until the process ends
        check_permissions(settings)
        runtime = build_runtime(
            settings, secrets, clock=clock, config_path=Path(args.config) if args.config else None
        )
        return run_bounded(runtime.run())


def run_bounded(main: Coroutine[Any, Any, int], grace_s: float = 1.0) -> int:
    """`asyncio.run`, except that tasks still alive when `main` returns get `grace_s` to end
    after a cancel instead of being waited for without end (a task that swallowed its
    cancellation kept a stopped service alive, SPEC §6)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main)
    finally:
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=grace_s))
        loop.close()


def _status_title(shown: dict[str, Any]) -> str:
    age = shown["heartbeat_age_s"]
    offset = shown.get("service_clock_offset_s") or 0
    if age is None:
        seen = "never seen"
    elif age < 0:  # its clock is ahead of this one (a heartbeat without its clock's offset)
        seen = f"last seen at {shown['last_seen']}, {-age:g} s ahead of this clock"
    else:
        seen = f"last seen {age:g} s ago"
    if abs(offset) >= 1:  # a demo's or a test's offset clock, a wall clock stepped since start
        way = "ahead of" if offset > 0 else "behind"
        seen += f" (its clock runs {round(abs(offset))} s {way} this host's)"
    if shown["service"] == "running":
        return f"a2a-edge running ({shown['health']}), {seen}"
    then = "; broker, cloud and loop values are from then" if age is not None else ""
    return f"a2a-edge not running, {seen}{then}"


def cmd_status(args: argparse.Namespace) -> int:
    from edge.cli import out as cli_out
    from edge.views import state as views

    settings = settings_of(args)
    try:
        shown = _status_when_ready(settings, args.wait_ready) if args.wait_ready else None
        shown = shown or views.status(settings)
    except StorageError as exc:
        if not args.json:
            raise  # one line on stderr, exit 3 (edge/cli/entry.py)
        cli_out.emit_json({"service": "not running", "health": "unknown", "error": str(exc)})
        return EXIT_NOT_RUNNING
    if args.json:
        cli_out.emit_json(shown)
    else:
        agents = shown.get("agents") or []
        cli_out.fields(
            {k: v for k, v in shown.items() if k != "agents"}, title=_status_title(shown)
        )
        cli_out.table(  # SPEC 4.8: every agent, as its last status said
            ["agent", "state", "boot", "since", "tasks"],
            [
                [
                    a["capability_id"] + ("" if a["known"] else " (not in the catalog)"),
                    a["state"],
                    a["boot_id"] or "-",
                    a["since"],
                    " ".join(a["tasks"]) or "-",
                ]
                for a in agents
            ]
            or [["(none has sent a status)", "", "", "", ""]],
            title="agents",
        )
    if args.wait_ready and not shown["ready"]:
        print(f"a2a-edge: not READY within {args.wait_ready:g} s", file=sys.stderr)
        return EXIT_NOT_RUNNING
    return EXIT_OK if shown["service"] == "running" else EXIT_NOT_RUNNING


WAIT_READY_POLL_S = 0.1


def _status_when_ready(settings: Any, wait_s: float) -> dict[str, Any] | None:
    """Poll until the service has sent READY=1 (its heartbeat says so; a state DB that does
    not exist or is being made is a service still starting). The status then, or None at the
    deadline (the caller reads it once more, and says why it cannot)."""
    from edge.views import state as views

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            shown = views.status(settings)
        except Exception:  # a DB not there yet, or not migrated yet: a service still starting
            shown = None
        if shown is not None and shown["ready"]:
            return shown
        time.sleep(WAIT_READY_POLL_S)
    return None


def cmd_config_check(args: argparse.Namespace) -> int:
    """Every check `run` makes of its config before it opens anything: the file and the
    variables, the secret files, the catalog. A problem is one line and exit 2
    (edge/cli/entry.py)."""
    from edge.cli import out as cli_out
    from edge.config.catalogs import catalog_report, load_catalogs
    from edge.config.view import effective

    settings = settings_of(args)
    catalog = catalog_report(load_catalogs(settings)[0])  # docs/catalog.md
    shown = effective(settings, Path(args.config) if args.config else None)
    shown["catalog"], shown["warnings"] = catalog["capabilities"], catalog["warnings"]
    if args.json:
        cli_out.emit_json(shown)
        return EXIT_OK
    rows = [
        (row["key"], row["source"], json.dumps(row["value"], ensure_ascii=False))
        for row in shown["settings"]
    ]
    cli_out.table(("key", "source", "value"), rows, title=f"config ok: {shown['file'] or '-'}")
    for key, what in shown["secrets"].items():
        print(f"{key}: {what}")
    for cap, where in catalog["capabilities"].items():
        print(f"catalog: {cap} from {where['file']} (safe_stop {where['safe_stop'] or '-'})")
    for warning in catalog["warnings"]:
        print(f"warning: {warning}")
    return EXIT_OK


def cmd_db_backup(args: argparse.Namespace) -> int:
    from a2a_common.backup import BackupError, backup_file
    from edge.cli import out as cli_out
    from edge.store.schema import MIGRATIONS

    settings = settings_of(args)
    dest = Path(args.file).absolute()
    state = settings.state_db_path.parent
    if dest.resolve().is_relative_to(state.resolve()):  # SPEC 5.5: a forget removes it there
        raise BackupError(
            f"cannot write {dest}: it is inside the state dir {state}, whose copies a forget"
            " removes; write it outside the state dir"
        )
    size = backup_file(settings.state_db_path, dest, len(MIGRATIONS))
    if args.json:
        cli_out.emit_json({"file": str(dest), "bytes": size})
    else:
        print(f"{dest} {size} bytes")
    return EXIT_OK


def register(sub: Subparsers) -> None:
    run = command(
        sub,
        "run",
        "run the service in the foreground (what the systemd unit starts)",
        cmd_run,
        json=False,
    )
    run.add_argument(
        "--accept-new-device-id",
        action="store_true",
        help="let a state dir kept under another device_id take the configured one (without"
        " it that start is refused, exit 2; also accept_new_device_id = true in the config,"
        " or A2A_EDGE_ACCEPT_NEW_DEVICE_ID=1)",
    )
    status = command(
        sub,
        "status",
        "is the service running, its health and what the state DB holds (read-only)",
        cmd_status,
        description="Service health from its last heartbeat (labelled `last seen N s ago`) and"
        " the state DB's counts, read-only: safe while the service runs.\n"
        "Exit 0 when the service runs, 3 when it does not (as `systemctl status`).",
    )
    status.add_argument(
        "--wait-ready",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS until the service has sent READY=1 (its MQTT subscriptions"
        " are held: what is published now is not lost); exit 3 if it has not by then",
    )
    config = group(sub, "config", "the configuration")
    command(
        config,
        "check",
        "validate the config and print the effective values, secrets redacted",
        cmd_config_check,
        description="Load the config as `run` would (the file, then the A2A_EDGE_* variables),"
        " read the secret files and the catalog, and print every key with its value and where"
        " it came from. Exit 0 when valid, 2 with one line naming the key when not.",
    )
    db = group(sub, "db", "the state DB file")
    backup = command(
        db, "backup", "a consistent copy of the state DB, safe while it runs", cmd_db_backup
    )
    backup.add_argument(
        "file",
        help="where the copy goes (created 0600, replaced atomically); outside the state dir:"
        " every copy in it goes at the next forget",
    )
