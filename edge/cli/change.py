"""How a CLI command changes state: ask the running service over MQTT (it stays the one
writer); when none answers, run the same command through the service's app here, under the
state dir's lock (edge/cli/admin.py). Then print the answer: JSON with `--json`, else a line or
a table, and turn it into an exit code (1 for a failure or when nothing matched)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from edge.cli.kit import EXIT_FAILURE, EXIT_OK, NothingMatched, settings_of
from edge.config.settings import load_secrets


def ask(
    args: argparse.Namespace,
    command: str,
    payload: dict[str, Any],
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The answer `{"ok": …, "result"|"error": …}` of the service, or of this process."""
    from edge.channel import admin_client
    from edge.cli import admin

    settings = settings_of(args)
    secrets = load_secrets(settings)
    answer = admin_client.ask_service(settings, secrets, command, payload)
    if answer is None:
        answer = admin.run_offline(settings, secrets, command, payload, progress=progress)
    return answer


def report(
    args: argparse.Namespace,
    answer: dict[str, Any],
    text: Callable[[dict[str, Any]], None],
    matched: Callable[[dict[str, Any]], str | None] | None = None,
) -> int:
    """Print `answer` (`text(result)` without `--json`); exit 1 when it failed, or when
    `matched(result)` says what was not found (a message for `NothingMatched`). The JSON and
    the exit code agree: `"ok": true` only with exit 0; nothing matched is `"ok": false` with
    `"error": "nothing matched: …"` (and the result as the service gave it)."""
    from edge.cli import out as cli_out

    missing = matched(answer["result"]) if matched and answer.get("ok") else None
    if missing:
        answer = {**answer, "ok": False, "error": f"nothing matched: {missing}"}
    if args.json:
        cli_out.emit_json(answer)
    elif answer.get("ok"):
        text(answer["result"])
    if missing:
        raise NothingMatched(missing)
    if not answer.get("ok"):
        cli_out.error(str(answer.get("error")))
        return EXIT_FAILURE
    return EXIT_OK
