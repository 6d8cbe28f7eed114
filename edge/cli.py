"""`a2a-edge` command line.

Exit codes: 0 ok, 1 failure, 2 bad config or usage, 3 the state DB cannot be used (for example
a schema newer than this build) — systemd should not restart on 2 or 3.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import json
import logging
import os
import sys
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any

from a2a_common.backup import BackupError
from a2a_common.clock import Clock, OffsetClock, SteadyClock, SystemClock
from a2a_common.sqlite import StorageError
from edge import reload, statelock
from edge.cli_read import (
    cmd_inbox_dead,
    cmd_memory_show,
    cmd_memory_snapshot,
    cmd_status,
    cmd_sync_status,
    cmd_workflows_list,
    cmd_workflows_trace,
    print_value,
    settings_of,
)
from edge.config import load_secrets
from edge.errors import ConfigError, ServiceSilent
from edge.log import configure
from edge.permissions import check_permissions
from taskmanager.errors import CatalogError

EXIT_CONFIG = 2
EXIT_STORAGE = 3


def runtime_clock(environ: Mapping[str, str]) -> Clock:
    """The steady clock over the system clock (or a test/demo offset clock)."""
    base: Clock = SystemClock()
    if environ.get("A2A_CLOCK_OFFSET_FILE"):  # demos that let days pass
        base = OffsetClock(environ["A2A_CLOCK_OFFSET_FILE"])
    elif environ.get("A2A_WALL_SKEW_FILE"):  # tests that make the wall clock jump
        base = OffsetClock(environ["A2A_WALL_SKEW_FILE"], wall_only=True)
    return SteadyClock(base)


def cmd_run(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    secrets = load_secrets(settings)
    configure(settings.log.level, settings.log.format)
    faulthandler.enable()  # a fatal signal (SIGBUS from a mapped file) leaves its stack in the log
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


def _memory_change(args: argparse.Namespace, command: str, payload: dict[str, Any]) -> int:
    from edge import admin

    settings = settings_of(args)
    secrets = load_secrets(settings)
    answer = admin.ask_service(settings, secrets, command, payload)
    if answer is None:
        answer = admin.run_offline(settings, secrets, command, payload)
    if args.json or answer.get("ok"):
        print_value(answer if args.json else answer["result"], args.json)
    if not answer.get("ok"):
        print(f"a2a-edge: {answer.get('error')}", file=sys.stderr)
    return 0 if answer.get("ok") else 1


def cmd_memory_forget(args: argparse.Namespace) -> int:
    for scope, target in (
        ("pair", args.pair),
        ("session", args.session),
        ("profile_key", args.key),
    ):
        if target:
            return _memory_change(args, "memory.forget", {"scope": scope, "id": target})
    return _memory_change(args, "memory.forget", {"scope": "all"})


def cmd_memory_revoke(args: argparse.Namespace) -> int:
    return _memory_change(args, "memory.revoke", {"key": args.key})


def cmd_workflows_cancel(args: argparse.Namespace) -> int:
    from edge import admin

    settings = settings_of(args)
    secrets = load_secrets(settings)
    command, payload = "workflow.cancel", {"workflow_id": args.workflow_id}
    answer = admin.ask_service(settings, secrets, command, payload)
    if answer is None:
        answer = admin.run_offline(settings, secrets, command, payload)
    if args.json:
        print_value(answer, True)
    elif answer.get("ok"):
        print(f"cancelled {', '.join(answer['result']['cancelled']) or args.workflow_id}")
    else:
        print(f"a2a-edge: {answer.get('error')}", file=sys.stderr)
    return 0 if answer.get("ok") else 1


class _Bar:
    """A progress bar on stderr, shown only when there are many writes to send."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.shown = total > 100

    def __call__(self, done: int, pending: int) -> None:
        if not self.shown:
            return
        total = max(self.total, done + pending)
        filled = int(30 * done / total) if total else 30
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")


def cmd_sync_replay(args: argparse.Namespace) -> int:
    import time

    from edge import admin, views

    settings = settings_of(args)
    secrets = load_secrets(settings)
    before = views.sync_status(settings)["pending"]
    bar = _Bar(before)
    command, payload = "sync.replay", {"requeue_dead": args.requeue_dead}
    answer = admin.ask_service(settings, secrets, command, payload)
    if answer is None:
        answer = admin.run_offline(settings, secrets, command, payload, progress=bar)
    elif answer.get("ok"):  # the service sends; follow its progress read-only
        total = answer["result"]["pending"]
        bar = _Bar(total)
        last, still = total, time.monotonic()
        while (
            pending := views.sync_status(settings)["pending"]
        ) and time.monotonic() - still < args.stall_s:
            if pending != last:
                last, still = pending, time.monotonic()
            bar(total - pending, pending)
            time.sleep(0.2)
        answer["result"]["pending"] = pending
    bar.close()
    if args.json:
        print_value(answer, True)
    else:
        print(json.dumps(answer.get("result", {}), ensure_ascii=False))
        if answer.get("error"):
            print(f"a2a-edge: {answer['error']}", file=sys.stderr)
    return 0 if answer.get("ok") else 1


def cmd_db_backup(args: argparse.Namespace) -> int:
    from a2a_common.backup import backup_file
    from edge.schema import MIGRATIONS

    settings = settings_of(args)
    dest = Path(args.file).absolute()
    size = backup_file(settings.state_db_path, dest, len(MIGRATIONS))
    print(f"{dest} {size} bytes")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from sim.demo import run_demo

    return run_demo(as_json=args.json, keep=args.keep, verbose=args.verbose, broker=args.broker)


def cmd_sim_cloud(args: argparse.Namespace) -> int:
    from sim.cloud import serve_forever
    from sim.cloud_state import Faults

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    faults = Faults(
        latency_s=args.latency_s, status=args.status, drop=args.down, malformed=args.malformed
    )
    serve_forever(args.host, args.port, faults)
    return 0


def cmd_sim_devices(args: argparse.Namespace) -> int:
    import signal
    import threading

    from sim.devices import DeviceAgents
    from sim.world import World

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    root = f"{args.prefix}/{args.device_id}"
    world = World(current_room=args.room, battery=args.battery, time_scale=args.time_scale)
    agents = DeviceAgents(args.port, root, host=args.host, world=world, protocol=args.protocol)
    print(f"sim devices for {root} on {args.host}:{args.port}", file=sys.stderr)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    agents.close()
    return 0


def _add_memory(sub: Any) -> None:
    memory = sub.add_parser("memory", help="the memory cache (read-only views)")
    memory_sub = memory.add_subparsers(dest="memory_command", required=True)
    forget = memory_sub.add_parser("forget", help="forget a pair, a session, a key, or all")
    target = forget.add_mutually_exclusive_group(required=True)
    target.add_argument("--pair")
    target.add_argument("--session")
    target.add_argument("--key")
    target.add_argument("--all", action="store_true")
    revoke = memory_sub.add_parser("revoke", help="revert a wrong profile item")
    revoke.add_argument("--key", required=True)
    for name, func, text in (
        ("show", cmd_memory_show, "tiers, counts, profile items with status and sources"),
        ("snapshot", cmd_memory_snapshot, "the exact snapshot the next turn would send"),
        ("forget", cmd_memory_forget, ""),
        ("revoke", cmd_memory_revoke, ""),
    ):
        cmd = {"forget": forget, "revoke": revoke}.get(name) or memory_sub.add_parser(
            name, help=text
        )
        cmd.add_argument("--config")
        cmd.add_argument("--json", action="store_true")
        cmd.set_defaults(func=func)


def _add_workflows(sub: Any) -> None:
    workflows = sub.add_parser("workflows", help="what the TaskManager runs and ran")
    wf_sub = workflows.add_subparsers(dest="workflows_command", required=True)
    listing = wf_sub.add_parser("list", help="newest workflows first")
    listing.add_argument("--limit", type=int, default=50)
    listing.set_defaults(func=cmd_workflows_list)
    trace = wf_sub.add_parser("trace", help="one workflow from request to terminal evidence")
    trace.add_argument("workflow_id")
    trace.set_defaults(func=cmd_workflows_trace)
    cancel = wf_sub.add_parser("cancel", help="cancel a workflow (through the service if up)")
    cancel.add_argument("workflow_id")
    cancel.set_defaults(func=cmd_workflows_cancel)
    for cmd in (listing, trace, cancel):
        cmd.add_argument("--config")
        cmd.add_argument("--json", action="store_true")


def _add_sync(sub: Any) -> None:
    sync = sub.add_parser("sync", help="the pending-sync outbox")
    sync_sub = sync.add_subparsers(dest="sync_command", required=True)
    sync_status = sync_sub.add_parser("status", help="pending, in flight, dead letters, cursor")
    sync_status.set_defaults(func=cmd_sync_status)
    replay = sync_sub.add_parser("replay", help="send the outbox now")
    replay.add_argument("--requeue-dead", action="store_true", help="dead letters go again")
    replay.add_argument(
        "--stall-s",
        type=float,
        default=30.0,
        help="stop following the service when nothing moved this long",
    )
    replay.set_defaults(func=cmd_sync_replay)
    for cmd in (sync_status, replay):
        cmd.add_argument("--config")
        cmd.add_argument("--json", action="store_true")


def _add_inbox(sub: Any) -> None:
    inbox = sub.add_parser("inbox", help="inbound messages the runtime could not apply")
    inbox_sub = inbox.add_subparsers(dest="inbox_command", required=True)
    dead = inbox_sub.add_parser("dead", help="dead letters: refused after a handler failed")
    dead.add_argument("--limit", type=int, default=100)
    dead.add_argument("--config")
    dead.add_argument("--json", action="store_true")
    dead.set_defaults(func=cmd_inbox_dead)


def _add_db(sub: Any) -> None:
    db = sub.add_parser("db", help="the state DB file")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    backup = db_sub.add_parser("backup", help="a consistent copy, safe while the service runs")
    backup.add_argument("file", help="where the copy goes (created 0600)")
    backup.add_argument("--config")
    backup.set_defaults(func=cmd_db_backup)


def _add_sim(sub: Any) -> None:
    sim = sub.add_parser("sim", help="reference counterparts for development and tests")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True)
    cloud = sim_sub.add_parser("cloud", help="the reference cloud planner (HTTP)")
    cloud.add_argument("--host", default="127.0.0.1")
    cloud.add_argument("--port", type=int, default=18080)
    cloud.add_argument("--latency-s", type=float, default=0.0, help="delay every answer")
    cloud.add_argument("--status", type=int, default=None, help="answer every request so")
    cloud.add_argument("--down", action="store_true", help="drop every connection")
    cloud.add_argument("--malformed", action="store_true", help="answer truncated JSON")
    cloud.set_defaults(func=cmd_sim_cloud)
    devices = sim_sub.add_parser("devices", help="device agents on MQTT (a simulated robot)")
    devices.add_argument("--host", default="127.0.0.1")
    devices.add_argument("--port", type=int, default=1883)
    devices.add_argument("--protocol", choices=["5", "3.1.1"], default="5")
    devices.add_argument("--prefix", default="a2a")
    devices.add_argument("--device-id", default="robot-001")
    devices.add_argument("--room", default="거실", help="where the robot starts")
    devices.add_argument("--battery", type=float, default=82.0)
    devices.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply every duration (0.1 = ten times faster)",
    )
    devices.set_defaults(func=cmd_sim_devices)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="a2a-edge", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the service in the foreground")
    run.add_argument("--config", help="TOML config (default /etc/a2a-edge/config.toml)")
    run.set_defaults(func=cmd_run)

    status = sub.add_parser("status", help="what the state DB holds (read-only)")
    status.add_argument("--config")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    reload.add_parser(sub)
    _add_memory(sub)
    _add_workflows(sub)
    _add_sync(sub)
    _add_inbox(sub)
    _add_db(sub)
    demo = sub.add_parser("demo", help="broker + sim cloud + runtime on this machine, one turn")
    demo.add_argument("--verbose", action="store_true", help="show the runtime's log")
    demo.add_argument("--json", action="store_true", help="print the events as JSON lines")
    demo.add_argument("--keep", action="store_true", help="keep the state dir afterwards")
    demo.add_argument(
        "--broker",
        choices=["auto", "mosquitto", "embedded"],
        default="auto",
        help="auto: Mosquitto when installed, else the embedded broker",
    )
    demo.set_defaults(func=cmd_demo)

    _add_sim(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except ConfigError as exc:
        print(f"a2a-edge: config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except (ServiceSilent, BackupError) as exc:
        print(f"a2a-edge: {exc}", file=sys.stderr)
        return 1
    except CatalogError as exc:
        print(f"a2a-edge: config error: taskmanager.catalog_file: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except StorageError as exc:
        print(f"a2a-edge: state DB: {exc}", file=sys.stderr)
        return EXIT_STORAGE
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
