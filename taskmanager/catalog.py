"""The capability catalog (SPEC §4.1): what this robot can do, shipped as `catalog.json` and
replaceable by a file named in config. Validated when loaded; a bad catalog stops the start."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskmanager.errors import CatalogError


class _OperationModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    timeout_s: float = Field(gt=0, le=86400)
    ack_timeout_s: float = Field(gt=0, le=3600)
    resource: str | None = Field(None, min_length=1, max_length=32)
    cancelable: bool = True
    requires_consent: bool = False
    terminal_evidence: list[str] = []


@dataclass(frozen=True)
class Operation:
    capability_id: str
    operation_id: str
    timeout_s: float
    ack_timeout_s: float
    resource: str | None
    cancelable: bool
    requires_consent: bool
    terminal_evidence: tuple[str, ...]


class Catalog:
    def __init__(self, operations: dict[tuple[str, str], Operation]) -> None:
        self._ops = operations

    def get(self, capability_id: str, operation_id: str) -> Operation | None:
        return self._ops.get((capability_id, operation_id))

    def capabilities(self) -> list[str]:
        return sorted({cap for cap, _ in self._ops})

    def __len__(self) -> int:
        return len(self._ops)


def parse_catalog(data: object, source: str) -> Catalog:
    if not isinstance(data, dict) or not data:
        raise CatalogError(source, "must be a non-empty object of capabilities")
    ops: dict[tuple[str, str], Operation] = {}
    for cap, operations in data.items():
        if not isinstance(operations, dict) or not operations:
            raise CatalogError(f"{source}:{cap}", "must be a non-empty object of operations")
        for op, spec in operations.items():
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
                tuple(model.terminal_evidence),
            )
    return Catalog(ops)


def load_catalog(path: str = "") -> Catalog:
    """The shipped catalog, or the file at `path` when given."""
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise CatalogError(path, f"cannot read: {exc.strerror}") from exc
        source = path
    else:
        text = resources.files("taskmanager").joinpath("catalog.json").read_text(encoding="utf-8")
        source = "catalog.json"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CatalogError(source, f"not valid JSON: {exc}") from exc
    return parse_catalog(data, source)
