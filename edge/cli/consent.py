"""`a2a-edge consent list|grant SCOPE [--ttl S]|revoke SCOPE` (SPEC §5.6).

`list` opens the state DB read-only (safe while the service runs): the grants held now — the
stored ones not yet expired and those standing in config — and the newest audit rows. `grant`
and `revoke` go through `P/admin/request` (`consent.grant` / `consent.revoke`) to the running
service and print its answer, or, when no service runs, take the DB themselves through the same
app (as `memory forget` does)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from edge.cli.change import ask, report
from edge.cli.kit import EXIT_OK, Subparsers, add_limit, command, group, positive_float, settings_of

GRANT_COLUMNS = ("scope", "person", "source", "granted_at", "expires_at")
PERSON_HELP = "whose grant (SPEC 5.7: a person id; default: the household's)"
SCOPE_HELP = "category:<name> (e.g. category:health) or capability:<id> (e.g. capability:vital_app)"


def _grant_rows(grants: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            g["scope"],
            g.get("person", "household"),
            g["source"],
            g.get("granted_at", "-"),
            g.get("expires_at", "-"),
        ]
        for g in grants
    ]


def cmd_consent_list(args: argparse.Namespace) -> int:
    from edge.cli import out as cli_out
    from edge.host.clock import runtime_clock
    from edge.store.consent import ConsentRegister
    from edge.views.state import readonly_db

    settings = settings_of(args)
    with readonly_db(settings) as db:
        register = ConsentRegister(
            db=db,
            clock=runtime_clock(os.environ),
            categories=settings.privacy.consented_categories,
            capabilities=settings.privacy.consented_capabilities,
        )
        shown = {"grants": [g.wire() for g in register.held()], "audit": register.audit(args.limit)}
    if args.json:
        cli_out.emit_json(shown)
        return EXIT_OK
    if shown["grants"]:
        cli_out.table(GRANT_COLUMNS, _grant_rows(shown["grants"]), title="grants held")
    else:
        print("no consent grant is held")
    if shown["audit"]:
        columns = ("ts", "action", "scope", "person", "source")
        rows = [[r.get(c, "-") for c in columns] for r in shown["audit"]]
        cli_out.table(columns, rows, title="audit (newest first)")
    return EXIT_OK


def _change(args: argparse.Namespace, command_name: str, payload: dict[str, Any]) -> int:
    def text(result: dict[str, Any]) -> None:
        from edge.cli import out as cli_out

        cli_out.table(
            GRANT_COLUMNS,
            _grant_rows(result["grants"]),
            title=f"{command_name.partition('.')[2]} {args.scope}: ok; held now",
        )

    return report(args, ask(args, command_name, payload), text)


def cmd_consent_grant(args: argparse.Namespace) -> int:
    payload: dict[str, Any] = {"scope": args.scope}
    if args.person is not None:
        payload["person"] = args.person
    if args.ttl is not None:
        payload["ttl_s"] = args.ttl
    return _change(args, "consent.grant", payload)


def cmd_consent_revoke(args: argparse.Namespace) -> int:
    payload: dict[str, Any] = {"scope": args.scope}
    if args.person is not None:
        payload["person"] = args.person
    return _change(args, "consent.revoke", payload)


def register(sub: Subparsers) -> None:
    consent = group(
        sub, "consent", "what the user agreed to at the robot: list, grant, revoke (SPEC §5.6)"
    )
    listing = command(
        consent, "list", "grants held now and the audit (read-only)", cmd_consent_list
    )
    add_limit(listing, 20, "audit rows")
    grant = command(
        consent,
        "grant",
        "grant a category or a capability",
        cmd_consent_grant,
        description="Through the running service when one answers, else directly.",
    )
    grant.add_argument("scope", metavar="SCOPE", help=SCOPE_HELP)
    grant.add_argument("--person", metavar="PERSON_ID", help=PERSON_HELP)
    grant.add_argument(
        "--ttl", type=positive_float, metavar="S", help="seconds until it expires (default: never)"
    )
    revoke = command(
        consent,
        "revoke",
        "revoke a grant: it ends at once; running steps that needed it are cancelled",
        cmd_consent_revoke,
    )
    revoke.add_argument("scope", metavar="SCOPE", help=SCOPE_HELP)
    revoke.add_argument("--person", metavar="PERSON_ID", help=PERSON_HELP)
