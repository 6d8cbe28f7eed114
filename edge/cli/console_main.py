"""Start `a2a-edge console`: a fresh access token, the MQTT follower, the HTTP server; the
address with the token is printed on stdout (one line, as notebook servers do). Stops on
SIGINT/SIGTERM. Works with the service down (the page says so, and a cancel is refused) and
with no state DB yet (the page says the state DB cannot be read)."""

from __future__ import annotations

import secrets
import signal
import sys
import threading
from types import FrameType

from edge.cli.kit import EXIT_FAILURE, EXIT_OK
from edge.config.settings import Settings, load_secrets
from edge.console.live import Canceller, Changes, Follower
from edge.console.server import ConsoleServer


def serve(settings: Settings, bind: str, port: int) -> int:
    from edge.cli import out as cli_out

    token = secrets.token_urlsafe(24)
    changes = Changes()
    keys = load_secrets(settings)
    try:
        server = ConsoleServer(
            (bind, port),
            settings=settings,
            token=token,
            changes=changes,
            canceller=Canceller(settings, keys),
        )
    except OSError as exc:
        cli_out.error(f"console: cannot listen on {bind}:{port}: {exc.strerror or exc}")
        return EXIT_FAILURE
    follower = Follower(settings, keys, changes)
    follower.start()
    host = f"[{bind}]" if ":" in bind else bind
    print(f"a2a-edge console: http://{host}:{server.server_address[1]}/?token={token}")
    sys.stdout.flush()
    _stop_on_signals(server)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        follower.stop()
    return EXIT_OK


def _stop_on_signals(server: ConsoleServer) -> None:
    def stop(_signum: int, _frame: FrameType | None) -> None:
        # shutdown() waits for serve_forever: from another thread, not this handler's
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
