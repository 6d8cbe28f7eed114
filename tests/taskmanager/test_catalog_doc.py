"""docs/catalog.md cannot drift from the loader (issue 35 item 3): every catalog example loads
through `load_catalog` as an extra file over the shipped catalog (the shipped effect catalog
still fits), every effect example through `load_effects` over them, every refused example is
refused with the line the page shows after it, and the page's TOML is a valid config."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from edge.config.catalogs import catalog_report, no_safe_stop_warning
from edge.config.settings import Settings
from taskmanager.catalog import load_catalog
from taskmanager.effects import load_effects
from taskmanager.errors import CatalogError

DOC = Path(__file__).parents[2] / "docs" / "catalog.md"
BLOCK = re.compile(r"```(\w+)(?: (\w+))?\n(.*?)```", re.DOTALL)


def blocks(kind: str) -> list[str]:
    return [body for lang, tag, body in BLOCK.findall(DOC.read_text()) if (tag or lang) == kind]


def refused_pairs() -> list[tuple[str, str]]:
    """Each refused example with the text block right after it."""
    found = BLOCK.findall(DOC.read_text())
    return [
        (body, found[i + 1][2].strip())
        for i, (_lang, tag, body) in enumerate(found)
        if tag == "refused"
    ]


def written(tmp_path: Path, kind: str) -> list[str]:
    paths = []
    for i, body in enumerate(blocks(kind)):
        path = tmp_path / f"{kind}-{i}.json"
        path.write_text(body, encoding="utf-8")
        paths.append(str(path))
    return paths


def test_the_page_has_examples_of_each_kind() -> None:
    assert len(blocks("catalog")) >= 2 and blocks("effects") and len(refused_pairs()) >= 4


def test_every_catalog_example_extends_the_shipped_catalog(tmp_path: Path) -> None:
    extras = written(tmp_path, "catalog")
    for extra in extras:
        catalog = load_catalog("", [extra])
        load_effects(catalog)  # the shipped effect catalog still fits
        assert set(json.loads(Path(extra).read_text())) <= set(catalog.capabilities())
    both = load_catalog("", extras)
    assert both.get("arm", "pick_up") is not None
    assert both.get("mobility", "move_to_room").timeout_s == 300  # type: ignore[union-attr]
    assert catalog_report(both)["capabilities"]["arm"] == {
        "from": "taskmanager.catalog_extra_files",
        "file": extras[0],
        "safe_stop": "halt",
    }


def test_every_effect_example_loads_over_the_page_catalogs(tmp_path: Path) -> None:
    catalog = load_catalog("", written(tmp_path, "catalog"))
    for path in written(tmp_path, "effects"):
        effects = load_effects(catalog, path)
        assert len(effects) == len(json.loads(Path(path).read_text()))


@pytest.mark.parametrize("example,why", refused_pairs())
def test_every_refused_example_is_refused_so(tmp_path: Path, example: str, why: str) -> None:
    path = tmp_path / "refused.json"
    path.write_text(example, encoding="utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog("", [str(path)])
    assert why in str(info.value)
    assert info.value.key == "taskmanager.catalog_extra_files"


def test_the_page_toml_is_a_valid_config() -> None:
    for body in blocks("toml"):
        settings = Settings.model_validate(tomllib.loads(body))
        assert settings.taskmanager.catalog_extra_files


def test_the_warning_the_page_shows_is_the_one_config_check_prints() -> None:
    [shown] = [b for b in blocks("text") if b.startswith("warning:")]
    assert shown.strip() == f"warning: {no_safe_stop_warning('wave_only')}"


def test_every_field_of_an_operation_is_in_the_pages_table() -> None:
    """A field added to the loader (SPEC 4.8's `on_agent_lost`/`on_restart`, say) fails this
    until docs/catalog.md documents it; the page names no field the loader does not take."""
    from taskmanager.catalog import _OperationModel

    page = DOC.read_text()
    table = page.split("### The fields of an operation", 1)[1].split("\n\n", 2)[1]
    documented = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    assert documented == set(_OperationModel.model_fields)
    coming = page.split("## Coming", 1)[1] if "## Coming" in page else ""
    assert not [f for f in _OperationModel.model_fields if f"`{f}`" in coming]  # it came
