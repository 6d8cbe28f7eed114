"""`a2a-edge memory …`: the memory cache — views (show, snapshot, pairs, sessions) and the two
changes a user may ask for (forget, revoke).

`memory forget` is table-driven so that an option plugs in with one entry: a target in
`FORGET_TARGETS` (one of them is required, they exclude each other), a modifier in
`FORGET_OPTIONS` (argparse keywords plus the admin request's argument name)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from edge.cli.change import ask, report
from edge.cli.kit import EXIT_OK, Subparsers, add_limit, command, confirm, group, settings_of

# flag, admin scope, metavar, help
FORGET_TARGETS: list[tuple[str, str, str, str]] = [
    ("--pair", "pair", "PAIR_ID", "one question/answer pair (ids: `memory pairs`)"),
    ("--session", "session", "SESSION_ID", "a session and its pairs (ids: `memory sessions`)"),
    ("--key", "profile_key", "KEY", "a profile key (e.g. preferred_room) and its evidence"),
    ("--person", "person", "PERSON_ID", "everything of one person of the household (SPEC 5.7)"),
]
PERSON_HELP = "one person's memory only (SPEC 5.7; `household`: the household's)"
# flag, argparse keywords, the admin request's argument it sets (left out when not given)
FORGET_OPTIONS: list[tuple[str, dict[str, Any], str]] = [
    (
        "--keep-sources",
        {
            "action": "store_const",
            "const": False,
            "help": "with --key: keep the pairs the key came from (default: forgotten too)",
        },
        "with_sources",
    ),
]


def cmd_memory_show(args: argparse.Namespace) -> int:
    from edge.cli import out as cli_out
    from edge.views import state as views

    shown = views.memory_show(settings_of(args), args.person)
    if args.json:
        cli_out.emit_json(shown)
        return EXIT_OK
    cli_out.fields({k: v for k, v in shown.items() if k != "profile_items"})
    rows = [
        (
            item["key"],
            json.dumps(item["value"], ensure_ascii=False),
            item["state"],
            item["category"],
            item["confidence"],
            item["mentions"],
            "; ".join(f"{n} {', '.join(ids)}" for n, ids in item["sources"].items() if ids),
        )
        for item in shown["profile_items"]
    ]
    columns = ("key", "value", "status", "category", "confidence", "mentions", "sources")
    cli_out.table(columns, rows, title="profile items:", right=("confidence", "mentions"))
    return EXIT_OK


def cmd_memory_snapshot(args: argparse.Namespace) -> int:
    from edge.views import state as views

    snapshot, size = views.memory_snapshot(
        settings_of(args), getattr(args, "utterance", None), args.person or "household"
    )
    if args.json:
        print(json.dumps({"bytes": size, "snapshot": snapshot}, ensure_ascii=False))
    else:
        print(json.dumps(snapshot, ensure_ascii=False, indent=2))
        print(f"# {size} bytes of canonical JSON")
    return EXIT_OK


def cmd_memory_pairs(args: argparse.Namespace) -> int:
    from edge.cli import out as cli_out
    from edge.views import state as views

    rows = views.pairs(settings_of(args), args.limit, args.session, args.person)
    if args.json:
        cli_out.emit_json(rows)
        return EXIT_OK
    columns = ("pair_id", "session_id", "created_at", "status", "route_family", "synced")
    cli_out.table(
        (*columns, "categories", "user_text"),
        [
            [row[c] for c in columns] + [",".join(row["categories"]) or "-", row["user_text"]]
            for row in rows
        ],
        clip={"user_text": 40},
    )
    return EXIT_OK


def cmd_memory_sessions(args: argparse.Namespace) -> int:
    from edge.cli import out as cli_out
    from edge.views import state as views

    rows = views.sessions(settings_of(args), args.limit, args.person)
    if args.json:
        cli_out.emit_json(rows)
        return EXIT_OK
    columns = ("session_id", "started_at", "last_turn_at", "pairs", "has_summary")
    cli_out.table(columns, [[row[c] for c in columns] for row in rows], right=("pairs",))
    return EXIT_OK


def _removed_text(result: dict[str, Any]) -> None:
    from edge.cli import out as cli_out

    cli_out.fields(result.get("removed", result), title="forgotten:")


def cmd_memory_forget(args: argparse.Namespace) -> int:
    scope, target = "all", None
    for flag, name, _, _ in FORGET_TARGETS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            scope, target = name, value
    if scope == "all":
        confirm("forget everything the robot remembers of its users?", yes=args.yes)
    payload: dict[str, Any] = {"scope": scope} if target is None else {"scope": scope, "id": target}
    for flag, _, name in FORGET_OPTIONS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value is not None:  # an option not given is left out
            payload[name] = value

    def matched(result: dict[str, Any]) -> str | None:
        if scope == "all" or any(result.get("removed", {}).values()):
            return None
        return f"no {scope.replace('_', ' ')} {target}"

    return report(args, ask(args, "memory.forget", payload), _removed_text, matched)


def cmd_memory_revoke(args: argparse.Namespace) -> int:
    def matched(result: dict[str, Any]) -> str | None:
        return None if result.get("revoked") else f"no profile item {args.key}"

    def text(result: dict[str, Any]) -> None:
        from edge.cli import out as cli_out

        cli_out.fields(result, title="revoked:")

    return report(args, ask(args, "memory.revoke", {"key": args.key}), text, matched)


def _add_forget(sub: Subparsers) -> None:
    forget = command(
        sub,
        "forget",
        "forget a pair, a session, a profile key, or everything (--all)",
        cmd_memory_forget,
        description="Forget along provenance (SPEC §5.5): the target and what was learnt from"
        " it, in the DB, the sync outbox and the snapshot; the cloud is told by a deletion.\n"
        "Through the running service when one answers, else directly (under the state lock).\n"
        "Exit 1 when nothing matched the target.",
    )
    target = forget.add_mutually_exclusive_group(required=True)
    for flag, _, metavar, text in FORGET_TARGETS:
        target.add_argument(flag, metavar=metavar, help=text)
    target.add_argument("--all", action="store_true", help="everything the cache holds")
    forget.add_argument(
        "--yes", "-y", action="store_true", help="do not ask before --all (needed off a terminal)"
    )
    for flag, keywords, _ in FORGET_OPTIONS:
        forget.add_argument(flag, **keywords)


def register(sub: Subparsers) -> None:
    memory = group(
        sub,
        "memory",
        "the memory cache: show, snapshot, pairs, sessions; forget and revoke",
    )
    show = command(
        memory, "show", "tiers, counts, profile items with status and sources", cmd_memory_show
    )
    show.add_argument("--person", metavar="PERSON_ID", help=PERSON_HELP)
    snap = command(
        memory,
        "snapshot",
        "the exact memory snapshot the next turn would send, and its size",
        cmd_memory_snapshot,
    )
    snap.add_argument(
        "--for",
        dest="utterance",
        metavar="TEXT",
        help="the snapshot a turn with these words would send (focused on them, SPEC 5.2)",
    )
    snap.add_argument(
        "--person",
        metavar="PERSON_ID",
        help="the snapshot this person's turn would send (SPEC 5.7; default: the household's)",
    )
    pairs = command(memory, "pairs", "question/answer pairs, newest first", cmd_memory_pairs)
    add_limit(pairs, 50, "pairs")
    pairs.add_argument("--session", metavar="SESSION_ID", help="only this session's pairs")
    pairs.add_argument("--person", metavar="PERSON_ID", help=PERSON_HELP)
    sessions = command(memory, "sessions", "sessions, most recent first", cmd_memory_sessions)
    add_limit(sessions, 50, "sessions")
    sessions.add_argument("--person", metavar="PERSON_ID", help=PERSON_HELP)
    _add_forget(memory)
    revoke = command(
        memory,
        "revoke",
        "revert a wrong profile item (it is no longer used or shared)",
        cmd_memory_revoke,
        description="Revoke a profile item: it leaves the snapshot and the cloud is told."
        " Exit 1 when no item has the key.",
    )
    revoke.add_argument("--key", required=True, metavar="KEY", help="the profile key")
