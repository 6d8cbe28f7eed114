"""Both catalogs as the config names them (docs/catalog.md): the capability catalog (shipped,
`taskmanager.catalog_file` replacing it, `taskmanager.catalog_extra_files` added over it) and
the effect catalog checked against it. `run` and `config check` load them the same way; a bad
one raises CatalogError (exit 2, naming the key to fix). `config check` also shows where each
capability came from and warns about one that can move or run something without a
`safe_stop`."""

from __future__ import annotations

from typing import Any

from edge.config.settings import Settings
from taskmanager import Catalog, EffectCatalog, load_catalog, load_effects


def load_catalogs(settings: Settings) -> tuple[Catalog, EffectCatalog]:
    tm = settings.taskmanager
    catalog = load_catalog(tm.catalog_file, tm.catalog_extra_files)
    return catalog, load_effects(catalog, settings.experience.effects_file)


def no_safe_stop_warning(capability_id: str) -> str:
    return (
        f"catalog: {capability_id} has no safe_stop: a cancel its agent does not confirm "
        "cannot be escalated (SPEC 4.2) — nothing stops the body, the step stays "
        "CANCEL_UNCONFIRMED with the alarm until the agent answers"
    )


def catalog_report(catalog: Catalog) -> dict[str, Any]:
    """What `config check` adds: each capability's origin and safe stop, and the warnings."""
    capabilities = {
        cap: {
            "from": catalog.sources.get(cap, ("shipped", ""))[0],
            "file": catalog.sources.get(cap, ("", "catalog.json"))[1],
            "safe_stop": stop.operation_id if (stop := catalog.safe_stop(cap)) else None,
        }
        for cap in catalog.capabilities()
    }
    warnings = [no_safe_stop_warning(cap) for cap in catalog.unstoppable()]
    return {"capabilities": capabilities, "warnings": warnings}
