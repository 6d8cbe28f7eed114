"""`a2a-edge consent list|grant SCOPE [--ttl S]|revoke SCOPE` (SPEC §5.6).

`list` opens the state DB read-only (safe while the service runs): the grants held now — the
stored ones not yet expired and those standing in config — and the newest audit rows. `grant`
and `revoke` go through `P/admin/request` (`consent.grant` / `consent.revoke`) to the running
service and print its answer, or, when no service runs, take the DB themselves through the same
app (as `memory forget` does). Text by default, JSON with `--json`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from edge.cli_read import print_value, settings_of
from edge.config import load_secrets


def cmd_consent_list(args: argparse.Namespace) -> int:
    from edge.cli import runtime_clock
    from edge.consent import ConsentRegister
    from edge.views import readonly_db

    settings = settings_of(args)
    with readonly_db(settings) as db:
        register = ConsentRegister(
            db=db,
            clock=runtime_clock(os.environ),
            categories=settings.privacy.consented_categories,
            capabilities=settings.privacy.consented_capabilities,
        )
        shown = {"grants": [g.wire() for g in register.held()], "audit": register.audit(20)}
    if args.json:
        print_value(shown, True)
        return 0
    print("grants held:" if shown["grants"] else "no consent grant is held")
    for grant in shown["grants"]:
        until = grant.get("expires_at", "no expiry")
        print(f"  {grant['scope']:<32} source={grant['source']:<6} until {until}")
    if shown["audit"]:
        print("audit (newest first):")
    for row in shown["audit"]:
        print(f"  {row['ts']}  {row['action']:<6} {row['scope']} ({row['source']})")
    return 0


def _change(args: argparse.Namespace, command: str, payload: dict[str, Any]) -> int:
    from edge import admin

    settings = settings_of(args)
    secrets = load_secrets(settings)
    answer = admin.ask_service(settings, secrets, command, payload)
    if answer is None:
        answer = admin.run_offline(settings, secrets, command, payload)
    if args.json:
        print_value(answer, True)
    elif answer.get("ok"):
        grants = answer["result"]["grants"]
        print(f"{command.partition('.')[2]} {args.scope}: ok; held now:")
        for grant in grants:
            print(f"  {grant['scope']} ({grant['source']}, until {grant.get('expires_at', '-')})")
    if not answer.get("ok"):
        print(f"a2a-edge: {answer.get('error')}", file=sys.stderr)
    return 0 if answer.get("ok") else 1


def cmd_consent_grant(args: argparse.Namespace) -> int:
    payload: dict[str, Any] = {"scope": args.scope}
    if args.ttl is not None:
        payload["ttl_s"] = args.ttl
    return _change(args, "consent.grant", payload)


def cmd_consent_revoke(args: argparse.Namespace) -> int:
    return _change(args, "consent.revoke", {"scope": args.scope})


def add_consent(sub: Any) -> None:
    consent = sub.add_parser("consent", help="what the user agreed to (the consent register)")
    consent_sub = consent.add_subparsers(dest="consent_command", required=True)
    listing = consent_sub.add_parser("list", help="grants held now and the audit (read-only)")
    listing.set_defaults(func=cmd_consent_list)
    grant = consent_sub.add_parser("grant", help="grant category:<name> or capability:<id>")
    grant.add_argument("scope", help="category:<name> | capability:<id>")
    grant.add_argument("--ttl", type=float, help="seconds until the grant expires")
    grant.set_defaults(func=cmd_consent_grant)
    revoke = consent_sub.add_parser("revoke", help="revoke a grant: it ends at once")
    revoke.add_argument("scope", help="category:<name> | capability:<id>")
    revoke.set_defaults(func=cmd_consent_revoke)
    for cmd in (listing, grant, revoke):
        cmd.add_argument("--config")
        cmd.add_argument("--json", action="store_true")
