"""`a2a-edge config check`: the effective config, key by key, with where each value came from
(`default`, `file`, or the `A2A_EDGE_…` variable) and secrets redacted.

Secrets live in files (`mqtt.password_file`, `cloud.token_file`): their paths are shown, their
contents never — only that they could be read and how long they are. A key that holds a secret
itself (a name with password, token or secret that is not a `_file` path) is shown as
`<redacted>`; today there is none, the rule is there for the next one."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edge.config.settings import DEFAULT_CONFIG_PATH, ENV_PREFIX, Settings, load_secrets

REDACTED = "<redacted>"
_SECRET = re.compile(r"password|token|secret", re.IGNORECASE)


def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and name != "privacy.categories":
            out.update(_flat(value, name + "."))
        else:
            out[name] = value
    return out


def _is_secret(key: str) -> bool:
    return bool(_SECRET.search(key.rsplit(".", 1)[-1])) and not key.endswith("_file")


def _file_keys(path: Path | None) -> set[str]:
    source = path if path is not None else DEFAULT_CONFIG_PATH
    if path is None and not source.exists():
        return set()
    with source.open("rb") as fh:
        return set(_flat(tomllib.load(fh)))


def _env_keys(environ: Mapping[str, str]) -> dict[str, str]:
    """Dotted key -> the variable that set it (or set a table above it)."""
    out = {}
    for name in environ:
        if name.startswith(ENV_PREFIX):
            out[".".join(name[len(ENV_PREFIX) :].lower().split("__"))] = name
    return out


def _source(key: str, in_file: set[str], env: dict[str, str]) -> str:
    for candidate, variable in env.items():
        if key == candidate or key.startswith(candidate + "."):
            return variable
    if key in in_file or any(key.startswith(k + ".") for k in in_file):
        return "file"
    return "default"


def effective(
    settings: Settings, path: Path | None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """What `config check --json` prints (the text form is the same rows)."""
    env = _env_keys(os.environ if environ is None else environ)
    in_file = _file_keys(path)
    rows = []
    for key, value in _flat(settings.model_dump(mode="json")).items():
        shown = REDACTED if _is_secret(key) and value else value
        rows.append({"key": key, "value": shown, "source": _source(key, in_file, env)})
    secrets = load_secrets(settings)
    files = {
        "mqtt.password_file": secrets.mqtt_password,
        "cloud.token_file": secrets.cloud_token,
    }
    read = {
        key: f"read, {len(text)} characters (hidden)"
        for key, text in files.items()
        if text is not None
    }
    source = path if path is not None else DEFAULT_CONFIG_PATH
    file = str(source) if path is not None or source.exists() else None
    return {"ok": True, "file": file, "settings": rows, "secrets": read}
