"""Settings: a TOML file, then `A2A_EDGE_<SECTION>__<KEY>` environment overrides, validated.

Every problem becomes one `ConfigError` naming the dotted key, which the CLI prints on one line
and exits 2 with.
"""

from __future__ import annotations

import ipaddress
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from cache import LexiconError, load_lexicon_file
from cloud_client import (
    DEFAULT_MAX_BYTES,
    TlsMode,
    checked_url,
    clear_text_token,
    host_of,
    security_warnings,
    tls_mode,
)
from edge.config.errors import ConfigError

ENV_PREFIX = "A2A_EDGE_"
DEFAULT_CONFIG_PATH = Path("/etc/a2a-edge/config.toml")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MqttSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(1883, ge=1, le=65535)
    protocol: Literal["5", "3.1.1"] = "5"
    topic_prefix: str = Field("a2a", pattern=r"^[A-Za-z0-9_\-]+(/[A-Za-z0-9_\-]+)*$")
    keepalive_s: int = Field(30, ge=5, le=65535)
    session_expiry_s: int = Field(86400, ge=0, le=4294967295)
    max_payload_bytes: int = Field(65536, ge=512, le=268435455)
    username: str = ""
    password_file: str = ""
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    reconnect_min_s: float = Field(0.5, gt=0, le=60)
    reconnect_max_s: float = Field(30.0, gt=0, le=3600)
    dedupe_keep_days: int = Field(7, ge=1, le=3650)
    dead_letters_keep: int = Field(1000, ge=1, le=1_000_000)  # inbound dead letters (SPEC 2.4)
    dead_letters_keep_days: int = Field(7, ge=1, le=3650)
    dead_letters_max_kb: int = Field(4096, ge=64, le=1_048_576)  # their payloads' total bytes
    turn_max_age_s: float = Field(30.0, gt=0, le=3600)  # older turns: rejected `stale`

    @field_validator("protocol", mode="before")
    @classmethod
    def _protocol_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) else value


class CloudSettings(_Section):
    base_url: str = Field("http://127.0.0.1:18080", pattern=r"^https?://[^\s/]+(/\S*)?$")
    token_file: str = ""
    turn_deadline_s: float = Field(4.0, gt=0, le=120)
    connect_timeout_s: float = Field(2.0, gt=0, le=60)
    read_timeout_s: float = Field(4.0, gt=0, le=300)
    verify_tls: bool = True
    allow_insecure: bool = False  # lets a token go over plain http to another host
    offline_probe_s: float = Field(0.5, gt=0, le=60)  # a turn's try while the cloud is away
    max_response_bytes: int = Field(DEFAULT_MAX_BYTES, ge=1024, le=256 * 1024 * 1024)

    @field_validator("base_url")
    @classmethod
    def _url_httpx_takes(cls, value: str) -> str:
        return checked_url(value)

    @property
    def tls_mode(self) -> TlsMode:
        """`verified`, `NOT verified` or `plain http`: what `a2a-edge status` shows."""
        return tls_mode(self.base_url, self.verify_tls)

    def warnings(self) -> list[str]:
        """What start-up warns about, every start: verification off, insecure allowed."""
        return security_warnings(
            self.base_url,
            verify_tls=self.verify_tls,
            has_token=bool(self.token_file),
            allow_insecure=self.allow_insecure,
        )

    def check(self) -> None:
        """Refuse a token over plain http to a host off this machine, unless allowed."""
        if self.allow_insecure or not clear_text_token(
            self.base_url, has_token=bool(self.token_file)
        ):
            return
        raise ConfigError(
            "cloud.base_url",
            f"plain http to {host_of(self.base_url)} would send the token of "
            "cloud.token_file in clear text; use https:// or set cloud.allow_insecure = true",
        )


class PromotionSettings(_Section):
    min_mentions: int = Field(3, ge=1, le=1000)
    min_days: int = Field(3, ge=1, le=365)
    auto_confirm_days: int = Field(7, ge=1, le=3650)
    window_days: int = Field(14, ge=1, le=3650)

    @model_validator(mode="after")
    def _window_holds_the_rule(self) -> PromotionSettings:
        if self.window_days < max(self.min_days, self.auto_confirm_days):
            raise ValueError(
                f"window_days ({self.window_days}) must be at least min_days and"
                f" auto_confirm_days ({max(self.min_days, self.auto_confirm_days)}):"
                " evidence outside the window is not counted"
            )
        return self


class MemorySettings(_Section):
    snapshot_budget_bytes: int = Field(4096, ge=256, le=1048576)
    # the canonical JSON of the `device_context` a turn forwards (edge/app/context_budget.py)
    device_context_budget_bytes: int = Field(4096, ge=256, le=65536)
    recent_pairs: int = Field(6, ge=0, le=100)
    # profile items the utterance does not name that may still go with a turn (standing context)
    snapshot_standing_items: int = Field(2, ge=0, le=64)
    session_idle_s: int = Field(1800, ge=1)
    # a turn's `speaker` below this confidence is the household's (SPEC 5.7)
    speaker_min_confidence: float = Field(0.8, ge=0, le=1)
    retention_days: int = Field(30, ge=1)
    retention_every_s: int = Field(600, ge=1)  # how often the retention sweep runs
    timezone: str = "Asia/Seoul"
    promotion: PromotionSettings = PromotionSettings()

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA time zone {value!r}") from exc
        return value


class CategoryPolicySettings(_Section):
    store: str = Field("forever", pattern=r"^(never|session|forever|days:[1-9][0-9]{0,4})$")
    share: bool = True


class PrivacySettings(_Section):
    sensitive_categories: list[str] = ["health", "vital", "home_layout", "contact"]
    consented_categories: list[str] = []  # standing consent grants (SPEC 5.6), source config
    consented_capabilities: list[str] = []  # e.g. ["vital_app"]: its steps run without asking
    # category -> policy; a sensitive category without an entry is kept 30 days, unshared
    categories: dict[str, CategoryPolicySettings] = {}
    # terms per category (JSON, or TOML when it ends in .toml) added to the shipped lexicon
    lexicon_file: str = ""

    @field_validator("lexicon_file")
    @classmethod
    def _readable_lexicon(cls, value: str) -> str:
        if value:
            try:
                load_lexicon_file(value)
            except LexiconError as exc:
                raise ValueError(str(exc)) from None
        return value


class SyncSettings(_Section):
    batch_size: int = Field(100, ge=1, le=1000)
    deadline_s: float = Field(10.0, gt=0, le=300)  # one sync request, retries included
    max_backoff_s: float = Field(60.0, gt=0, le=3600)
    linger_s: float = Field(0.5, ge=0, le=60)  # a new write waits this long for the next ones
    warn_pending: int = Field(1000, ge=1)  # warn on P/runtime/status past this many writes
    warn_age_s: int = Field(86400, ge=1)  # ... or when the oldest unsent write is this old


class OfflineIntent(_Section):
    """An utterance the robot handles itself while the cloud is away (matched as substrings)."""

    name: str = Field(min_length=1, max_length=64)
    words: list[str] = Field(min_length=1)
    action: Literal["cancel", "task"]
    capability_id: str = ""
    operation_id: str = ""
    args: dict[str, Any] = {}
    reply: str = Field(min_length=1, max_length=500)

    @model_validator(mode="after")
    def _task_names_an_operation(self) -> OfflineIntent:
        if self.action == "task" and not (self.capability_id and self.operation_id):
            raise ValueError("a task intent needs capability_id and operation_id")
        return self


DEFAULT_INTENTS = [
    OfflineIntent(
        name="stop",
        words=["멈춰", "그만", "취소", "정지"],
        action="cancel",
        reply="알겠어요, 멈출게요.",
    ),
    OfflineIntent(
        name="dock",
        words=["충전하러 가", "복귀"],
        action="task",
        capability_id="mobility",
        operation_id="return_to_dock",
        reply="충전하러 갈게요.",
    ),
]


class OfflineSettings(_Section):
    intents: list[OfflineIntent] = DEFAULT_INTENTS


class TaskManagerSettings(_Section):
    catalog_file: str = ""  # empty: the catalog shipped in the package; set: replaces it whole
    # each file's capabilities added over the catalog, in order (one of the same name replaced
    # whole): docs/catalog.md
    catalog_extra_files: list[Annotated[str, Field(min_length=1)]] = Field([], max_length=32)
    ask_timeout_s: float = Field(300.0, gt=0, le=86400)  # SPEC 4.2: a question waits this long
    cancel_confirm_s: float = Field(2.0, gt=0, le=60)  # SPEC 4.2: each cancel window
    events_deadline_s: float = Field(10.0, gt=0, le=300)
    events_linger_s: float = Field(0.25, ge=0, le=60)  # terminal reports wait for more this long
    keep_ended_days: int = Field(30, ge=1, le=3650)


class ExperienceSettings(_Section):
    """SPEC §4.7: the device-side kill switch of the Experience layer (SIGHUP reloads `mode`)."""

    mode: Literal["enforce", "shadow", "off"] = "enforce"
    effects_file: str = ""  # empty: the effect catalog shipped in the package (SPEC 4.5)
    observations_per_s: float = Field(5.0, gt=0, le=1000)  # per kind; more are refused
    observation_kinds: int = Field(16, ge=1, le=256)  # latest values kept for the turns


class MetricsSettings(_Section):
    enabled: bool = False
    allow_remote: bool = False  # before `host`: its validator reads it
    host: str = "127.0.0.1"
    port: int = Field(9464, ge=1, le=65535)
    # bounds of edge/host/metrics_server.py: open connections (more are closed at once), the time a
    # client has to send its whole request, and the size of request line + headers
    max_connections: int = Field(64, ge=1, le=512)
    request_timeout_s: float = Field(5.0, gt=0, le=60)
    max_request_bytes: int = Field(8192, ge=1024, le=65536)

    @field_validator("host")
    @classmethod
    def _loopback_unless_allowed(cls, value: str, info: ValidationInfo) -> str:
        if not is_loopback(value) and not info.data.get("allow_remote", False):
            raise ValueError(
                f"{value!r} is not a loopback address; the endpoint is for this robot only"
                " (set metrics.allow_remote = true to serve other hosts)"
            )
        return value


def is_loopback(host: str) -> bool:
    """`localhost`, 127.0.0.0/8 or ::1; a name other than localhost could be anything."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class StorageSettings(_Section):
    synchronous: Literal["NORMAL", "FULL", "EXTRA"] = "FULL"
    busy_timeout_ms: int = Field(5000, ge=0, le=600000)
    max_size_kb: int = Field(0, ge=0)  # 0: no cap; else the DB refuses to grow past it
    max_wal_mb: int = Field(16, ge=1, le=65536)  # the WAL file's bound (edge/host/checkpointer.py)
    # `<state_dir>/reserve`: space given back when the disk fills (edge/host/reserve.py); 0: none
    reserve_mb: int = Field(4, ge=0, le=1024)
    # pre-migration copies in `<state_dir>/backups/` older than this go (SPEC 5.5)
    backup_keep_days: int = Field(7, ge=1, le=3650)


class LogSettings(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"
    # a flood of refusals: at most this many lines of one kind a window, then one line with
    # the count of the rest at the window's end (edge/host/log.py RepeatLimiter)
    repeat_lines: int = Field(10, ge=1, le=10000)
    repeat_window_s: float = Field(60.0, gt=0, le=3600)

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class Settings(_Section):
    device_id: str = Field("robot-001", pattern=r"^[A-Za-z0-9._\-]{1,64}$")
    # a state dir kept under another device_id is refused at start (exit 2) unless this says
    # the new id is meant (`run --accept-new-device-id`, A2A_EDGE_ACCEPT_NEW_DEVICE_ID=1)
    accept_new_device_id: bool = False
    state_dir: str = "/var/lib/a2a-edge"
    mqtt: MqttSettings = MqttSettings()
    cloud: CloudSettings = CloudSettings()
    memory: MemorySettings = MemorySettings()
    sync: SyncSettings = SyncSettings()
    privacy: PrivacySettings = PrivacySettings()
    taskmanager: TaskManagerSettings = TaskManagerSettings()
    experience: ExperienceSettings = ExperienceSettings()
    offline: OfflineSettings = OfflineSettings()
    metrics: MetricsSettings = MetricsSettings()
    storage: StorageSettings = StorageSettings()
    log: LogSettings = LogSettings()

    @property
    def state_db_path(self) -> Path:
        return Path(self.state_dir) / "state.db"

    @property
    def topic_root(self) -> str:
        return f"{self.mqtt.topic_prefix}/{self.device_id}"


@dataclass(frozen=True)
class Secrets:
    """Read from the files the config names; never logged (repr hides them)."""

    mqtt_password: str | None = None
    cloud_token: str | None = None

    def __repr__(self) -> str:
        return "Secrets(<hidden>)"


def _env_value(raw: str) -> Any:
    text = raw.strip()
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return raw
    return raw


def _apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """Put the `A2A_EDGE_*` variables into `data`; returns dotted key -> the variable that set
    it, so that an error names the variable the operator has to fix, not only the key."""
    applied: dict[str, str] = {}
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        if len(path) > 3 or not all(path):
            raise ConfigError(".".join(path) or name, f"environment variable {name} is malformed")
        table = data
        for depth, part in enumerate(path[:-1]):
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise ConfigError(".".join(path[: depth + 1]), f"must be a table; set by {name}")
        table[path[-1]] = _env_value(raw)
        applied[".".join(path)] = name
    return applied


def _first_error(exc: ValidationError, from_env: Mapping[str, str]) -> ConfigError:
    err = exc.errors()[0]
    key = ".".join(str(part) for part in err["loc"]) or "(root)"
    message = err["msg"]
    if err["type"] == "extra_forbidden":
        message = "unknown key"
    elif "input" in err and not isinstance(err["input"], dict | list):
        message = f"{message} (got {err['input']!r})"
    for dotted, variable in from_env.items():
        if key == dotted or key.startswith(dotted + "."):
            message = f"{message}; set by {variable}"
            break
    return ConfigError(key, message)


def load_settings(path: Path | None, environ: Mapping[str, str] | None = None) -> Settings:
    """Load `path` (None: the default path if it exists, else defaults) plus env overrides."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    source = path if path is not None else DEFAULT_CONFIG_PATH
    if path is not None or source.exists():
        try:
            with source.open("rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError as exc:
            raise ConfigError("--config", f"file not found: {source}") from exc
        except OSError as exc:
            raise ConfigError("--config", f"cannot read {source}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("--config", f"{source} is not valid TOML: {exc}") from exc
    from_env = _apply_env(data, env)
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise _first_error(exc, from_env) from None
    settings.cloud.check()
    return settings


def _read_secret(key: str, file_name: str) -> str | None:
    if not file_name:
        return None
    try:
        return Path(file_name).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(key, f"cannot read secret file {file_name}: {exc.strerror}") from exc


def load_secrets(settings: Settings) -> Secrets:
    return Secrets(
        mqtt_password=_read_secret("mqtt.password_file", settings.mqtt.password_file),
        cloud_token=_read_secret("cloud.token_file", settings.cloud.token_file),
    )
