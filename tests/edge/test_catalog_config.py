"""`taskmanager.catalog_file` and `catalog_extra_files` through `a2a-edge config check` (issue 35
item 3, docs/catalog.md): a replaced catalog that the shipped effect catalog no longer fits
names the key the operator set, never an effects file they did not; extra files extend the
shipped catalog; a capability that can move without a `safe_stop` is a warning naming the
consequence; a bad extra file names its own key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import Cli

ARM = {
    "arm": {
        "safe_stop": "halt",
        "halt": {"timeout_s": 5, "ack_timeout_s": 2, "cancelable": False},
        "pick_up": {"timeout_s": 60, "ack_timeout_s": 5, "resource": "arm"},
    }
}


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


def config(tmp_path: Path, **taskmanager: Any) -> str:
    lines = ["[taskmanager]"] + [f"{k} = {json.dumps(v)}" for k, v in taskmanager.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def file(tmp_path: Path, name: str, body: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(body), encoding="utf-8")
    return str(path)


def test_a_replacing_catalog_names_catalog_file_not_the_effects_file(
    tmp_path: Path, cli: Cli
) -> None:
    own = file(tmp_path, "catalog.json", ARM)
    code, _out, err = cli("config", "check", "--config", config(tmp_path, catalog_file=own))
    assert code == 2
    assert err.startswith(f"a2a-edge: config error: taskmanager.catalog_file: {own}: has no ")
    assert "experience.effects_file to an effect catalog of your own" in err  # a way out
    assert "catalog_extra_files" in err  # the other


def test_extra_files_extend_the_shipped_catalog(tmp_path: Path, cli: Cli) -> None:
    arm = file(tmp_path, "arm.json", ARM)
    path = config(tmp_path, catalog_extra_files=[arm])
    shown = cli.json("config", "check", "--config", path)
    assert shown["catalog"]["arm"] == {
        "from": "taskmanager.catalog_extra_files",
        "file": arm,
        "safe_stop": "halt",
    }
    assert shown["catalog"]["mobility"]["from"] == "shipped" and shown["warnings"] == []
    code, out, _err = cli("config", "check", "--config", path)
    assert code == 0 and f"catalog: arm from {arm} (safe_stop halt)" in out


def test_a_capability_that_can_move_without_safe_stop_is_a_warning(
    tmp_path: Path, cli: Cli
) -> None:
    bare = {"arm": {"pick_up": {"timeout_s": 60, "ack_timeout_s": 5, "resource": "arm"}}}
    path = config(tmp_path, catalog_extra_files=[file(tmp_path, "arm.json", bare)])
    code, out, _err = cli("config", "check", "--config", path)
    assert code == 0
    [warning] = [line for line in out.splitlines() if line.startswith("warning:")]
    assert "arm has no safe_stop" in warning and "cannot be escalated" in warning
    assert cli.json("config", "check", "--config", path)["warnings"] == [warning[9:]]


def test_a_bad_extra_file_names_its_own_key(tmp_path: Path, cli: Cli) -> None:
    bad = file(tmp_path, "arm.json", {"arm": {"pick_up": {"timeout_s": 60}}})
    code, _out, err = cli(
        "config", "check", "--config", config(tmp_path, catalog_extra_files=[bad])
    )
    key = "taskmanager.catalog_extra_files"
    assert code == 2 and err.startswith(f"a2a-edge: config error: {key}: {bad}:arm.pick_up")
    missing = str(tmp_path / "nowhere.json")
    code, _out, err = cli(
        "config", "check", "--config", config(tmp_path, catalog_extra_files=[missing])
    )
    assert code == 2 and "taskmanager.catalog_extra_files" in err and "cannot read" in err
