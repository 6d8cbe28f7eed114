"""The capability catalog (SPEC §4.1): what this robot can do, shipped as `catalog.json`,
replaced whole by `taskmanager.catalog_file`, extended by `taskmanager.catalog_extra_files`
(each file's capabilities are added, or replace one of the same name whole, in order).
Validated when loaded; a bad catalog stops the start. Every field: docs/catalog.md.

An operation's `terminal_evidence` is its evidence allowlist (SPEC §4.5): a list whose entries are
a key (`"arrived_room"`: any bounded scalar value) or `{"key": …, "values": […], "arg": …}` (only
these values; `vital_app.start_session` has `vital_interaction_ended` ∈ {completed, cancelled}).
`arg` names the command argument whose target the evidence reports (`move_to_room`'s
`arrived_room` answers its `room`): evidence that names another target than the command's
argument proves nothing (SPEC §4.5, taskmanager/evidence.py)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from taskmanager.errors import CatalogError

EVIDENCE_KEY = r"^[A-Za-z0-9_.\-]{1,64}$"
ARG_NAME = r"^[A-Za-z0-9_.\-]{1,64}$"  # a command argument an evidence key answers
Scalar = str | bool | int | float


NAME = r"^[A-Za-z0-9_\-]{1,64}$"  # a capability or operation id: one MQTT topic level
MAX_TIMEOUT_S = 3600.0  # a step's longest timeout_s (taskmanager.validate refuses longer ones)
MOTION_RESOURCE = "base"  # an operation holding it moves the robot (SPEC 4.1): never `resend`


class _OperationModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    timeout_s: float = Field(gt=0, le=MAX_TIMEOUT_S)
    ack_timeout_s: float = Field(gt=0, le=3600)
    resource: str | None = Field(None, min_length=1, max_length=32)
    cancelable: bool = True
    requires_consent: bool = False
    terminal_evidence: list[Any] = Field([], max_length=32)
    # SPEC 4.8: what happens to a task whose agent is lost (`offline`) or restarts (new boot)
    on_agent_lost: Literal["fail", "wait"] = "fail"
    on_restart: Literal["fail", "resend"] = "fail"

    @model_validator(mode="after")
    def _motion_never_resent(self) -> _OperationModel:
        if self.resource == MOTION_RESOURCE and self.on_restart == "resend":
            raise ValueError(
                f"on_restart: resend is never allowed for motion (resource {MOTION_RESOURCE!r}):"
                " a move under way is never resumed blindly"
            )
        return self

    @field_validator("terminal_evidence")
    @classmethod
    def _allowlist(cls, entries: list[Any]) -> list[Any]:
        keys = [_entry(i, e).key for i, e in enumerate(entries)]
        if len(set(keys)) != len(keys):
            raise ValueError("evidence keys must be unique")
        return entries


@dataclass(frozen=True)
class EvidenceKey:
    """One allowed evidence key; `values` None: any bounded scalar; `arg`: the command argument
    it must agree with (None: it names no target of the command)."""

    key: str
    values: tuple[Scalar, ...] | None = None
    arg: str | None = None


@dataclass(frozen=True)
class Operation:
    capability_id: str
    operation_id: str
    timeout_s: float
    ack_timeout_s: float
    resource: str | None
    cancelable: bool
    requires_consent: bool
    evidence: tuple[EvidenceKey, ...] = ()
    on_agent_lost: str = "fail"  # SPEC 4.8: `fail` | `wait`
    on_restart: str = "fail"  # SPEC 4.8: `fail` | `resend`

    @property
    def terminal_evidence(self) -> tuple[str, ...]:
        """The allowed keys."""
        return tuple(e.key for e in self.evidence)

    def evidence_key(self, key: str) -> EvidenceKey | None:
        for entry in self.evidence:
            if entry.key == key:
                return entry
        return None


def _scalar(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | int) and (not isinstance(value, str) or len(value) <= 256)


def _entry(index: int, entry: object) -> EvidenceKey:
    """A key, or `{"key", "values"?, "arg"?}`; a ValueError that says which entry and why."""
    arg = None
    if isinstance(entry, dict):
        if set(entry) - {"key", "values", "arg"} or "key" not in entry:
            raise ValueError(
                f"entry {index}: an object has `key` and optional `values` and `arg` only"
            )
        key, values, arg = entry["key"], entry.get("values"), entry.get("arg")
        if arg is not None and not (isinstance(arg, str) and re.fullmatch(ARG_NAME, arg)):
            raise ValueError(f"entry {index}: `arg` is an argument name matching {ARG_NAME}")
        if values is not None and not (
            isinstance(values, list) and values and all(_scalar(v) for v in values)
        ):
            raise ValueError(f"entry {index}: `values` is a non-empty list of scalars")
    else:
        key, values = entry, None
    if not isinstance(key, str) or not re.fullmatch(EVIDENCE_KEY, key):
        raise ValueError(f"entry {index}: a key is a string matching {EVIDENCE_KEY}")
    return EvidenceKey(key, None if values is None else tuple(values), arg)


def _evidence(entries: list[Any]) -> tuple[EvidenceKey, ...]:
    return tuple(_entry(i, e) for i, e in enumerate(entries))


EXTRA_KEY = "taskmanager.catalog_extra_files"


class Catalog:
    def __init__(
        self,
        operations: dict[tuple[str, str], Operation],
        safe_stops: dict[str, str] | None = None,
        sources: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        self._ops = operations
        self._stops = dict(safe_stops or {})
        # capability -> (the config key that brought it, its file); "shipped": the package's
        self.sources = dict(sources or {})

    def extended(self, other: Catalog) -> Catalog:
        """This catalog with `other`'s capabilities added; one of the same name is replaced
        whole (its operations and its safe_stop)."""
        caps = set(other.capabilities())
        ops = {k: v for k, v in self._ops.items() if k[0] not in caps} | other._ops
        stops = {k: v for k, v in self._stops.items() if k not in caps} | other._stops
        return Catalog(ops, stops, {**self.sources, **other.sources})

    def unstoppable(self) -> list[str]:
        """Capabilities that can move or run something (an operation is cancelable or holds a
        resource) and name no `safe_stop`: a cancel their agent does not confirm cannot be
        escalated (SPEC 4.1, 4.2). `a2a-edge config check` warns about each."""
        running = {
            cap for (cap, _op), spec in self._ops.items() if spec.cancelable or spec.resource
        }
        return sorted(running - set(self._stops))

    def safe_stop(self, capability_id: str) -> Operation | None:
        """The operation that brings this capability to a safe stop when a cancel is not
        confirmed (SPEC 4.1, 4.2); None when the catalog names none."""
        op = self._stops.get(capability_id)
        return self._ops.get((capability_id, op)) if op else None

    def get(self, capability_id: str, operation_id: str) -> Operation | None:
        return self._ops.get((capability_id, operation_id))

    def capabilities(self) -> list[str]:
        return sorted({cap for cap, _ in self._ops})

    def __len__(self) -> int:
        return len(self._ops)


def _safe_stop(cap: str, operations: dict[str, Any], source: str) -> str | None:
    """A capability's `safe_stop` (SPEC 4.1): one of its own operations, which needs no
    consent and is not itself cancelable (a stop is never called back)."""
    name = operations.get("safe_stop")
    if name is None:
        return None
    where = f"{source}:{cap}.safe_stop"
    spec = operations.get(name) if isinstance(name, str) and name != "safe_stop" else None
    if not isinstance(spec, dict):
        raise CatalogError(where, "must name an operation of this capability")
    if spec.get("requires_consent") or spec.get("cancelable", True):
        raise CatalogError(where, f"{name} must need no consent and be cancelable: false")
    return str(name)


def parse_catalog(data: object, source: str, origin: str = "shipped") -> Catalog:
    if not isinstance(data, dict) or not data:
        raise CatalogError(source, "must be a non-empty object of capabilities")
    ops: dict[tuple[str, str], Operation] = {}
    stops: dict[str, str] = {}
    for cap, operations in data.items():
        if not re.fullmatch(NAME, cap):
            raise CatalogError(f"{source}:{cap}", f"a capability id matches {NAME}")
        if not isinstance(operations, dict) or not operations:
            raise CatalogError(f"{source}:{cap}", "must be a non-empty object of operations")
        stop = _safe_stop(cap, operations, source)
        if stop is not None:
            stops[cap] = stop
        for op, spec in operations.items():
            if op == "safe_stop":
                continue
            if not re.fullmatch(NAME, op):
                raise CatalogError(f"{source}:{cap}.{op}", f"an operation id matches {NAME}")
            try:
                model = _OperationModel.model_validate(spec)
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(p) for p in err["loc"])
                raise CatalogError(f"{source}:{cap}.{op}.{where}", err["msg"]) from None
            ops[(cap, op)] = Operation(
                cap,
                op,
                model.timeout_s,
                model.ack_timeout_s,
                model.resource,
                model.cancelable,
                model.requires_consent,
                _evidence(model.terminal_evidence),
                model.on_agent_lost,
                model.on_restart,
            )
    return Catalog(ops, stops, {cap: (origin, source) for cap in data})


def load_json(path: str, shipped: str, error: type[CatalogError]) -> tuple[Any, str]:
    """The JSON file at `path`, or the package's `shipped` one when `path` is empty, with the
    name its errors give; an unreadable or invalid file raises `error(source, why)`."""
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise error(path, f"cannot read: {exc.strerror}") from exc
        source = path
    else:
        text = resources.files("taskmanager").joinpath(shipped).read_text(encoding="utf-8")
        source = shipped
    try:
        return json.loads(text), source
    except ValueError as exc:
        raise error(source, f"not valid JSON: {exc}") from exc


def load_catalog(path: str = "", extra: Sequence[str] = ()) -> Catalog:
    """The shipped catalog, or the file at `path` when given, extended by each `extra` file in
    order (`taskmanager.catalog_extra_files`; their errors name that key)."""
    data, source = load_json(path, "catalog.json", CatalogError)
    catalog = parse_catalog(data, source, CatalogError.key if path else "shipped")
    for file in extra:
        try:
            more, where = load_json(file, "", CatalogError)
            catalog = catalog.extended(parse_catalog(more, where, EXTRA_KEY))
        except CatalogError as exc:
            exc.key = EXTRA_KEY
            raise
    return catalog
