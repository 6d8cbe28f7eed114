"""Topic names under `P = <prefix>/<device_id>` and the inbound payload models of SPEC §2.

`parse` is the single gate every inbound message passes: it returns a validated model or a
`Refusal` with a machine word (`error`) and a human reason (`detail`). The detail names fields
and rules, never the payload's text (it may be the user's words). Which model a topic takes is
the route table's business (`edge/runtime/routes.py`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from a2a_common.jsonx import MAX_DEPTH, finite
from a2a_common.people import PERSON_ID_MAX, PERSON_ID_PATTERN
from a2a_common.text import normal_value
from edge.store.consent import MAX_TTL_S, SCOPE_PATTERN
from taskmanager import CallbackStatus


class _Inbound(BaseModel):
    # built at a model's first message, not at import: most kinds (forget, consent, admin,
    # observation) come seldom and never need theirs (issue 36, steady RSS); a PUI press's is
    # built at import (PuiEventMsg), so a cancel waits for no schema
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


def _normal_in(cls: Any, value: Any) -> Any:
    """A field's strings as SPEC 2.4 takes them (`a2a_common.text`); other types unchanged
    for the field's own rules to refuse."""
    return normal_value(value)


class SpeakerMsg(BaseModel):
    """SPEC §5.7: who spoke, as the front-end's voice recognition says. The id is taken as
    SPEC 2.4 takes every text, then bounded, without MQTT wildcards, `/` or whitespace."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)
    id: StrictStr = Field(max_length=PERSON_ID_MAX, pattern=PERSON_ID_PATTERN)
    confidence: StrictFloat | StrictInt = Field(ge=0, le=1, allow_inf_nan=False)

    _normal_id = field_validator("id", mode="before")(_normal_in)


class TurnRequestMsg(_Inbound):
    turn_id: StrictStr = Field(min_length=1, max_length=128)
    recognized_text: StrictStr = Field(min_length=1, max_length=4000)
    session_id: StrictStr | None = Field(None, min_length=1, max_length=128)
    device_context: dict[str, Any] | None = None
    spoken_at: datetime | None = None  # ISO-8601 with a zone: when the user spoke (SPEC 2)
    speaker: SpeakerMsg | None = None  # SPEC 5.7: whose turn it is (else the household's)

    # SPEC 2.4: the text is taken (stored, fingerprinted, sent) in NFC without format
    # characters, before its length rules: an NFD repeat of an NFC turn is the same text
    _normal_text = field_validator("recognized_text", mode="before")(_normal_in)

    @field_validator("spoken_at", mode="before")
    @classmethod
    def _an_instant(cls, value: Any) -> Any:
        return None if value is None else _instant("spoken_at", value)


def _instant(name: str, value: Any) -> datetime:
    if not isinstance(value, str) or len(value) > 64:
        raise ValueError(f"{name} must be an ISO-8601 string")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{name} must be an ISO-8601 instant") from exc
    if parsed.tzinfo is None:
        raise ValueError(f"{name} must carry a zone (e.g. Z)")
    return parsed.astimezone(UTC)


class DeviceContextMsg(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    current_room: StrictStr | None = Field(None, max_length=64)
    battery: StrictFloat | StrictInt | None = Field(None, ge=0, le=100, allow_inf_nan=False)


class TaskCallbackMsg(_Inbound):
    """SPEC §2.2; `status` is one of the TaskManager's callback statuses."""

    task_id: StrictStr = Field(min_length=3, max_length=200, pattern=r"^[^:]+:[^:]+$")
    seq: StrictInt = Field(ge=1, lt=2**31)  # SPEC 2.2: a JSON integer in [1, 2^31)
    status: CallbackStatus
    progress: StrictFloat | StrictInt | None = Field(None, ge=0, le=100, allow_inf_nan=False)
    reason: StrictStr | None = Field(None, max_length=200)
    evidence: Any = None  # any JSON: the TaskManager's allowlist keeps what it may (SPEC 4.5)
    ts: StrictStr | None = Field(None, max_length=64)
    attempt: StrictInt | None = Field(None, ge=1, lt=2**31)  # the command's it answers
    agent: str | None = None  # who answered (a2a_agent sends its name): traced, never refused

    @field_validator("agent", mode="before")
    @classmethod
    def _agent_name(cls, value: Any) -> str | None:
        """A name the trace can show; anything else is dropped, the callback still applies."""
        ok = isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_.:\-]{1,64}", value)
        return value if ok else None

    @field_validator("progress")
    @classmethod
    def _progress_float(cls, value: float | None) -> float | None:
        return None if value is None else float(value)  # a JSON number only, never "50"


class AgentStatusMsg(_Inbound):
    """SPEC §2, §4.8 (`P/agent/<capability_id>/status`, retained): an agent's presence. `online`
    names its `boot_id` (new at every start of its process); `tasks` the task ids it holds."""

    state: Literal["online", "offline"]
    boot_id: StrictStr | None = Field(None, min_length=1, max_length=128)
    tasks: list[Annotated[StrictStr, Field(min_length=3, max_length=200)]] = Field(
        [], max_length=256
    )
    ts: StrictStr | None = Field(None, max_length=64)

    @model_validator(mode="after")
    def _online_has_boot(self) -> AgentStatusMsg:
        if self.state == "online" and self.boot_id is None:
            raise ValueError("boot_id is required when state is online")
        return self


class PuiEventMsg(_Inbound):
    model_config = ConfigDict(defer_build=False)
    event_id: StrictStr = Field(min_length=1, max_length=128)
    kind: Literal["cancel"]
    workflow_id: StrictStr | None = Field(None, min_length=1, max_length=96)


class WorkflowRequestMsg(BaseModel):
    """Only the id is checked here; the TaskManager validates the request itself."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    workflow_id: StrictStr = Field(min_length=1, max_length=96)


class ForgetMsg(_Inbound):
    request_id: StrictStr = Field(min_length=1, max_length=128)
    scope: Literal["pair", "session", "profile_key", "person", "all"]
    id: StrictStr | None = Field(None, min_length=1, max_length=128)
    with_sources: StrictBool = True  # profile_key: its source pairs go too (SPEC 5.5)

    _normal_id = field_validator("id", mode="before")(_normal_in)  # a key as SPEC 2.4 takes it

    @model_validator(mode="after")
    def _id_unless_all(self) -> ForgetMsg:
        if (self.scope == "all") != (self.id is None):
            raise ValueError(
                "id is required for pair/session/profile_key/person and absent for all"
            )
        if self.scope == "person" and not re.fullmatch(PERSON_ID_PATTERN, self.id or ""):
            raise ValueError("a person id is 1-64 characters without # + / or whitespace")
        return self


class ConsentRequestMsg(_Inbound):
    """SPEC §5.6 (`P/consent/request`, from the local UI). The admin commands `consent.grant`
    and `consent.revoke` read their args through this model too: one set of rules."""

    request_id: StrictStr = Field(min_length=1, max_length=128)
    action: Literal["grant", "revoke"]
    scope: StrictStr = Field(max_length=80, pattern=SCOPE_PATTERN)
    ttl_s: StrictInt | StrictFloat | None = Field(None, gt=0, le=MAX_TTL_S, allow_inf_nan=False)
    # SPEC 5.7: whose grant; absent = the household's
    person: StrictStr | None = Field(None, max_length=PERSON_ID_MAX, pattern=PERSON_ID_PATTERN)

    _normal_person = field_validator("person", mode="before")(_normal_in)

    @model_validator(mode="after")
    def _ttl_only_for_grant(self) -> ConsentRequestMsg:
        if self.action == "revoke" and self.ttl_s is not None:
            raise ValueError("ttl_s goes only with action grant")
        return self


class ObservationScope(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    room: StrictStr | None = Field(None, min_length=1, max_length=64)
    workflow_id: StrictStr | None = Field(None, min_length=1, max_length=96)
    capability_id: StrictStr | None = Field(None, min_length=1, max_length=64)


MAX_OBSERVATION_VALUE_BYTES = 2048


class ObservationMsg(_Inbound):
    """SPEC §4.6 (`P/observation`, from perception agents): a semantic observation. `value` is
    a flat object of scalars, at most 2 KiB; `observed_at` an instant with a zone."""

    observation_id: StrictStr = Field(min_length=1, max_length=128)
    kind: StrictStr = Field(pattern=r"^[a-z][a-z0-9_.\-]{0,63}$")
    observed_at: datetime
    scope: ObservationScope = ObservationScope()
    value: dict[str, StrictStr | bool | StrictInt | StrictFloat] = Field(max_length=32)
    requires_cloud_decision: StrictBool = False

    @field_validator("observed_at", mode="before")
    @classmethod
    def _an_instant(cls, value: Any) -> Any:
        return _instant("observed_at", value)

    @field_validator("requires_cloud_decision", mode="before")
    @classmethod
    def _a_bool(cls, value: Any) -> Any:
        if not isinstance(value, bool):
            raise ValueError("requires_cloud_decision must be true or false")
        return value

    @field_validator("value")
    @classmethod
    def _bounded(cls, value: dict[str, Any]) -> dict[str, Any]:
        if any(isinstance(v, str) and len(v) > 256 for v in value.values()):
            raise ValueError("value strings are at most 256 characters")
        if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_OBSERVATION_VALUE_BYTES:
            raise ValueError(f"value is larger than {MAX_OBSERVATION_VALUE_BYTES} bytes")
        return value


EXPIRY_GRACE_S = 2.0  # clock skew between the CLI and the service (the same robot: ~0)


class AdminRequestMsg(_Inbound):
    request_id: StrictStr = Field(min_length=1, max_length=128)
    command: Literal[
        "memory.forget",
        "memory.revoke",
        "sync.replay",
        "workflow.cancel",
        "consent.grant",
        "consent.revoke",
    ]
    args: dict[str, Any] = {}
    _normal_args = field_validator("args", mode="before")(_normal_in)  # keys, ids: SPEC 2.4
    # optional deadline (ISO-8601 with a zone): past it (and a small grace) the request is
    # refused `expired` and nothing is applied — the CLI has reported it failed by then
    expires_at: AwareDatetime | None = None

    @field_validator("expires_at", mode="before")
    @classmethod
    def _iso_text(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise ValueError("an ISO-8601 instant with a zone, as a string")
        return value


@dataclass(frozen=True)
class Arrival:
    """What the executor knows of an inbound message besides its body."""

    topic: str
    received_at: float  # perf_counter when paho read the message
    expires_at: float | None = None  # perf_counter instant of the sender's MQTT 5 expiry
    # sent as the broker's retained message at a SUBSCRIBE: the newest on its topic then
    retained: bool = False


@dataclass(frozen=True)
class Refusal:
    error: str
    detail: str


class Topics:
    """All topic names of one device, built once from the config."""

    def __init__(self, prefix: str, device_id: str) -> None:
        self.root = f"{prefix}/{device_id}"
        self.turn_request = self._t("turn/request")
        self.turn_response = self._t("turn/response")
        self.device_context = self._t("device/context")
        self.runtime_status = self._t("runtime/status")
        self.runtime_error = self._t("runtime/error")
        self.workflow_event = self._t("workflow/event")
        self.admin_response = self._t("admin/response")
        self.forget_result = self._t("memory/forget/result")
        self.pui_result = self._t("pui/result")
        self.consent_result = self._t("consent/result")

    def _t(self, suffix: str) -> str:
        return f"{self.root}/{suffix}"

    def under(self, kind: str) -> str:
        """`P/<kind>`, e.g. `P/turn/request`."""
        return self._t(kind)

    def kind_of(self, topic: str) -> str | None:
        """The suffix after `P/` when the topic is under this device's root, else None."""
        if not topic.startswith(self.root + "/"):
            return None
        return topic[len(self.root) + 1 :]

    def task_command(self, capability_id: str) -> str:
        return self._t(f"task/command/{capability_id}")

    def task_cancel(self, capability_id: str) -> str:
        return self._t(f"task/cancel/{capability_id}")

    def callback_capability(self, topic: str) -> str | None:
        """The capability a callback topic names (`P/task/callback/<capability_id>`, SPEC 2);
        None for the shared `P/task/callback`."""
        kind = self.kind_of(topic) or ""
        head, _, capability = kind.partition("task/callback/")
        return capability if not head and capability else None

    def agent_capability(self, topic: str) -> str | None:
        """The capability an agent status topic names (`P/agent/<capability_id>/status`)."""
        parts = (self.kind_of(topic) or "").split("/")
        ok = len(parts) == 3 and parts[0] == "agent" and parts[2] == "status" and parts[1]
        return parts[1] if ok else None


REF_KEYS = (
    "turn_id",
    "event_id",
    "request_id",
    "task_id",
    "seq",
    "observation_id",
    "workflow_id",
    "boot_id",  # an agent's status (SPEC 4.8)
)


def ref_of(payload: bytes, max_bytes: int) -> dict[str, Any]:
    """The ids a payload carried (SPEC §2.4 `ref`): strings up to 128 characters and integers,
    best effort — from its first 4 KiB when it is no readable JSON object (a turn whose
    `turn_id` can be read is answered, whatever else in it is broken)."""
    if len(payload) > max_bytes:  # not parsed: its ids looked for where writers put them
        return _ids_at_head(payload)
    decoded = decode_object(payload, max_bytes)
    if isinstance(decoded, Refusal):  # e.g. a NaN or a huge number elsewhere: read leniently
        decoded = decode_object(payload, max_bytes, lenient=True)
    if isinstance(decoded, Refusal):  # not UTF-8, not JSON, a lone surrogate: as a too-large one
        return _ids_at_head(payload)
    ref: dict[str, Any] = {}
    for key in REF_KEYS:
        value = decoded.get(key)
        if _is_ref(value):
            ref[key] = value
    return ref


def _is_ref(value: Any) -> bool:
    """A string up to 128 characters or an integer that fits 64 bits: what `ref` carries."""
    return (isinstance(value, str) and 0 < len(value) <= 128) or (
        isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    )


_HEAD_BYTES = 4096
_HEAD_ID = re.compile(
    rb'"(' + "|".join(REF_KEYS).encode() + rb')"\s*:\s*(?:"([^"\\]{1,512})"|(-?[0-9]{1,18})\b)'
)


def _ids_at_head(payload: bytes) -> dict[str, Any]:
    """The ids in the first 4 KiB of a payload too large or too broken to parse (a turn whose
    `turn_id` comes first is still answered, SPEC §2.4): plain strings up to 128 characters,
    integers; the first occurrence of each key."""
    ref: dict[str, Any] = {}
    for match in _HEAD_ID.finditer(payload[:_HEAD_BYTES]):
        key = match.group(1).decode()
        if key in ref:
            continue
        try:
            value = int(match.group(3)) if match.group(3) else match.group(2).decode("utf-8")
        except UnicodeDecodeError:
            continue
        if _is_ref(value):
            ref[key] = value
    return ref


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in JSON payloads")


def _lenient_int(text: str) -> int | None:
    """An integer as written (a refusal's `ref` echoes a `seq` truly); None (left out of `ref`)
    for one too long for `int` to read (Python refuses more than 4300 digits)."""
    try:
        return int(text)
    except ValueError:
        return None


_LENIENT: dict[str, Any] = {
    "parse_constant": lambda _c: 0,
    "parse_int": _lenient_int,
    "parse_float": lambda _s: 0.0,
}


def decode_object(
    payload: bytes, max_bytes: int, *, lenient: bool = False
) -> dict[str, Any] | Refusal:
    """The payload as a JSON object, or why not. `lenient` reads constants the gate refuses
    (NaN, Infinity) and floats as 0, integers as written: only to find the ids of a refused
    payload (its refusal's `ref`)."""
    if len(payload) > max_bytes:
        return Refusal("payload_too_large", f"{len(payload)} bytes > max_payload_bytes {max_bytes}")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return Refusal("invalid_json", "payload is not UTF-8")
    try:
        hooks = _LENIENT if lenient else {"parse_constant": _reject_constant}
        value = json.loads(text, **hooks)
    except RecursionError:
        return Refusal("invalid_json", "payload nests too deeply")
    except ValueError as exc:
        return Refusal("invalid_json", str(exc).split(":")[0][:200])
    if not isinstance(value, dict):
        return Refusal("not_an_object", f"payload is a JSON {type(value).__name__}, not an object")
    if "\\u" in text and not _is_text(value):
        return Refusal("invalid_json", "a \\u escape makes a lone surrogate: not Unicode text")
    return value


def _is_text(value: Any) -> bool:
    """No lone surrogate (`"\\ud800"`) anywhere: such a string can be neither stored nor
    sent again as UTF-8, so it must not get past the gate (it silenced the runtime once)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, RecursionError):
        return False
    return True


Model = TypeVar("Model", bound=BaseModel)


def parse(model: type[Model], payload: bytes, max_bytes: int) -> Model | Refusal:
    decoded = decode_object(payload, max_bytes)
    if isinstance(decoded, Refusal):
        return decoded
    if not finite(decoded):  # the same rule a workflow's args meet (a2a_common/jsonx.py)
        return Refusal(
            "invalid_field", f"numbers must be finite and nesting at most {MAX_DEPTH} deep"
        )
    try:
        return model.model_validate(decoded)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(payload)"
        word = "missing_field" if err["type"] == "missing" else "invalid_field"
        return Refusal(word, f"{where}: {err['msg']}")
