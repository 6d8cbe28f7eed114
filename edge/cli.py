"""`a2a-edge` command line.

Exit codes: 0 ok, 1 failure, 2 bad config or usage, 3 the state DB cannot be used (for example
a schema newer than this build) — systemd should not restart on 2 or 3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from a2a_common.sqlite import StorageError
from edge.config import Settings, load_secrets, load_settings
from edge.errors import ConfigError
from edge.log import configure
from taskmanager.errors import CatalogError

EXIT_CONFIG = 2
EXIT_STORAGE = 3


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(Path(args.config) if args.config else None)


def cmd_run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    secrets = load_secrets(settings)
    configure(settings.log.level, settings.log.format)
    from edge.wiring import build_runtime

    runtime = build_runtime(settings, secrets)
    return asyncio.run(runtime.run())


def _print(value: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(value, ensure_ascii=False, indent=None))
        return
    if isinstance(value, dict):
        for key, item in value.items():
            shown = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
            print(f"{key:>16}: {shown}")


def cmd_status(args: argparse.Namespace) -> int:
    from edge import inspect

    _print(inspect.status(_settings(args)), args.json)
    return 0


def cmd_memory_show(args: argparse.Namespace) -> int:
    from edge import inspect

    shown = inspect.memory_show(_settings(args))
    if args.json:
        _print(shown, True)
        return 0
    _print({k: v for k, v in shown.items() if k != "profile_items"}, False)
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
    from edge import inspect

    snapshot, size = inspect.memory_snapshot(_settings(args))
    if args.json:
        print(json.dumps({"bytes": size, "snapshot": snapshot}, ensure_ascii=False))
    else:
        print(json.dumps(snapshot, ensure_ascii=False, indent=2))
        print(f"# {size} bytes of canonical JSON")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from sim.demo import run_demo

    return run_demo(verbose=args.verbose)


def cmd_sim_cloud(args: argparse.Namespace) -> int:
    from sim.cloud import serve_forever

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    serve_forever(args.host, args.port)
    return 0


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

    memory = sub.add_parser("memory", help="the memory cache (read-only views)")
    memory_sub = memory.add_subparsers(dest="memory_command", required=True)
    for name, func, text in (
        ("show", cmd_memory_show, "tiers, counts, profile items with status and sources"),
        ("snapshot", cmd_memory_snapshot, "the exact snapshot the next turn would send"),
    ):
        cmd = memory_sub.add_parser(name, help=text)
        cmd.add_argument("--config")
        cmd.add_argument("--json", action="store_true")
        cmd.set_defaults(func=func)

    demo = sub.add_parser("demo", help="broker + sim cloud + runtime on this machine, one turn")
    demo.add_argument("--verbose", action="store_true", help="show the runtime's log")
    demo.set_defaults(func=cmd_demo)

    sim = sub.add_parser("sim", help="reference counterparts for development and tests")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True)
    cloud = sim_sub.add_parser("cloud", help="the reference cloud planner (HTTP)")
    cloud.add_argument("--host", default="127.0.0.1")
    cloud.add_argument("--port", type=int, default=18080)
    cloud.set_defaults(func=cmd_sim_cloud)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except ConfigError as exc:
        print(f"a2a-edge: config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
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
