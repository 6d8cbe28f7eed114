"""Errors of the process shell."""

from __future__ import annotations

from a2a_common.errors import EdgeError


class ConfigError(EdgeError):
    """A bad config file, key or value; `key` names it (dotted, e.g. `mqtt.port`)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


class ServiceSilent(EdgeError):
    """The service said it is online but did not answer a CLI command in time."""
