"""The effect catalog (SPEC §4.5): canonical effect ids, each with the providers that can bring it
about and the terminal evidence that proves it. Shipped as `effects.json` beside the capability
catalog, replaceable by `[experience] effects_file` (docs/catalog.md); validated when loaded,
against the capability catalog too (a provider names an operation the robot has, and its
evidence key is on that operation's allowlist): a bad one stops the start (exit 2).

A provider is a capability operation, optionally with argument constraints (`set_mode {mode:
"quiet"}` provides `quiet_environment`; `set_mode {mode: "auto"}` does not), or a skill id (a
cloud content skill: the device never binds a step to one, it is kept so that one catalog file can
serve both sides).

A provider that constrains the argument its evidence key answers (the catalog's `arg`:
`set_mode {mode: "quiet"}` with `purifier_mode`) lists evidence values that agree with it, or
evidence that agrees with the command could never prove the effect: refused at load."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskmanager.catalog import Catalog, EvidenceKey, Scalar, load_json
from taskmanager.errors import CatalogError, EffectsError
from taskmanager.evidence import agrees

EFFECT_ID = r"^[a-z][a-z0-9_]{0,63}$"


class _EvidenceModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    values: list[str | bool | int | float] | None = Field(None, min_length=1, max_length=32)


class _ProviderModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    capability_id: str | None = Field(None, min_length=1, max_length=64)
    operation_id: str | None = Field(None, min_length=1, max_length=64)
    skill_id: str | None = Field(None, min_length=1, max_length=64)
    args: dict[str, str | bool | int | float] = Field({}, max_length=16)
    evidence: _EvidenceModel | None = None


class _EffectModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    providers: list[_ProviderModel] = Field(min_length=1, max_length=32)


@dataclass(frozen=True)
class Provider:
    capability_id: str
    operation_id: str
    args: tuple[tuple[str, Scalar], ...] = ()  # every one must equal the step's argument
    evidence: EvidenceKey | None = None  # None: a skill, or nothing proves it
    skill_id: str = ""

    def provides(self, capability_id: str, operation_id: str, args: dict[str, Any]) -> bool:
        if self.skill_id or (self.capability_id, self.operation_id) != (
            capability_id,
            operation_id,
        ):
            return False
        return all(_same(args.get(k), v) for k, v in self.args)


def _same(a: object, b: object) -> bool:
    return isinstance(a, bool) == isinstance(b, bool) and a == b


class EffectCatalog:
    def __init__(self, effects: dict[str, tuple[Provider, ...]]) -> None:
        self._effects = effects

    def known(self, effect_id: str) -> bool:
        return effect_id in self._effects

    def providers(self, effect_id: str) -> tuple[Provider, ...]:
        return self._effects.get(effect_id, ())

    def __len__(self) -> int:
        return len(self._effects)


def _missing(catalog: Catalog, op: str, where: str) -> EffectsError:
    """The shipped effect catalog names an operation the configured capability catalog lacks:
    the error names the capability catalog's key and file, and the two ways out."""
    capability = op.split(".", 1)[0]
    key, file = catalog.sources.get(capability, ("", ""))
    if key in ("", "shipped"):  # gone with a replaced catalog: the catalog_file's
        key = CatalogError.key
        file = next((f for k, f in catalog.sources.values() if k == key), file)
    return EffectsError(
        file or key,
        f"has no {op}, which the shipped effect catalog names ({where}); keep it (add your "
        "capabilities with taskmanager.catalog_extra_files instead of replacing the catalog) "
        "or set experience.effects_file to an effect catalog of your own (docs/catalog.md)",
        key=key,
    )


def _provider(where: str, model: _ProviderModel, catalog: Catalog, shipped: bool) -> Provider:
    if model.skill_id:
        if model.capability_id or model.operation_id:
            raise EffectsError(where, "a provider is a skill_id or a capability operation")
        return Provider("", "", skill_id=model.skill_id)
    if not (model.capability_id and model.operation_id):
        raise EffectsError(where, "a provider names capability_id and operation_id")
    operation = catalog.get(model.capability_id, model.operation_id)
    if operation is None:
        op = f"{model.capability_id}.{model.operation_id}"
        if shipped:  # the user set the capability catalog, not this file: say so
            raise _missing(catalog, op, where)
        raise EffectsError(where, f"{op} is not in the capability catalog")
    if model.evidence is None:  # success needs terminal evidence (SPEC 4.5)
        raise EffectsError(where, "a capability provider names the evidence that proves it")
    listed = operation.evidence_key(model.evidence.key)
    if listed is None:
        raise EffectsError(where, f"evidence key {model.evidence.key} is not on its allowlist")
    values = None if model.evidence.values is None else tuple(model.evidence.values)
    evidence = EvidenceKey(model.evidence.key, values)
    arg = listed.arg
    if (
        arg is not None
        and arg in model.args
        and values is not None
        and not any(agrees(v, model.args[arg]) for v in values)
    ):
        raise EffectsError(  # evidence that agrees with the command could never prove it
            where,
            f"args.{arg} {model.args[arg]!r} is none of evidence {model.evidence.key}'s values",
        )
    args = tuple(sorted(model.args.items()))
    return Provider(model.capability_id, model.operation_id, args, evidence)


def parse_effects(
    data: object, source: str, catalog: Catalog, *, shipped: bool = False
) -> EffectCatalog:
    if not isinstance(data, dict) or not data:
        raise EffectsError(source, "must be a non-empty object of effects")
    effects: dict[str, tuple[Provider, ...]] = {}
    for effect_id, spec in data.items():
        if not re.fullmatch(EFFECT_ID, effect_id):
            raise EffectsError(f"{source}:{effect_id}", f"an effect id matches {EFFECT_ID}")
        try:
            model = _EffectModel.model_validate(spec)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise EffectsError(f"{source}:{effect_id}.{where}", err["msg"]) from None
        effects[effect_id] = tuple(
            _provider(f"{source}:{effect_id}.providers.{i}", p, catalog, shipped)
            for i, p in enumerate(model.providers)
        )
    return EffectCatalog(effects)


def load_effects(catalog: Catalog, path: str = "") -> EffectCatalog:
    """The shipped effect catalog, or the file at `path`, checked against `catalog`."""
    data, source = load_json(path, "effects.json", EffectsError)
    return parse_effects(data, source, catalog, shipped=not path)
