"""The a2a-edge process: config, wiring, the asyncio loop, the MQTT channel, systemd notify, CLI."""

import sys

__version__ = "0.1.0"

# httpx imports its own command line (click, pygments, rich) whenever those are installed, and
# they may be (this CLI's output needs rich; a dev venv has click): ~5 MB of the service's
# resident memory for nothing. This package comes first in every a2a-edge process, so it
# declines that one module before anything imports httpx; httpx then defines a stub `main`,
# which nothing here uses. tests/e2e/test_cli.py checks `run`'s import graph.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
