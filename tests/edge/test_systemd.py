"""The unit file passes `systemd-analyze verify` without a word, and stays well hardened."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from edge.config.settings import Settings, load_settings

UNIT = Path(__file__).parents[2] / "systemd" / "a2a-edge.service"
ANALYZE = shutil.which("systemd-analyze")
pytestmark = pytest.mark.skipif(
    ANALYZE is None and not sys.platform.startswith("linux"),
    reason="systemd-analyze exists only on Linux",
)


def installed_copy(tmp_path: Path) -> Path:
    """The unit as installed here: ExecStart pointing at this venv's a2a-edge."""
    here = Path(sys.executable).parent / "a2a-edge"
    text = UNIT.read_text().replace("/opt/a2a-edge/.venv/bin/a2a-edge", str(here))
    unit = tmp_path / "a2a-edge.service"
    unit.write_text(text)
    return unit


def test_unit_verifies_without_any_warning(tmp_path: Path) -> None:
    assert ANALYZE, "systemd-analyze is missing: ./bootstrap.sh test installs it (systemd)"
    done = subprocess.run(
        [ANALYZE, "verify", str(installed_copy(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout + done.stderr == ""


def test_unit_exposure_is_low_and_documented(tmp_path: Path) -> None:
    assert ANALYZE
    done = subprocess.run(
        [ANALYZE, "security", "--offline=true", "--no-pager", str(installed_copy(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    match = re.search(r"Overall exposure level for a2a-edge.service: ([0-9.]+)", done.stdout)
    assert match, done.stdout[-500:]
    assert float(match.group(1)) <= 2.0
    docs = (Path(__file__).parents[2] / "docs" / "design.md").read_text(encoding="utf-8")
    assert f"exposure {match.group(1)}" in docs


def test_unit_has_the_required_settings() -> None:
    text = UNIT.read_text()
    for line in (
        "Type=notify",
        "NotifyAccess=main",
        "WatchdogSec=",
        "Restart=on-failure",
        "StartLimitBurst=",
        "TimeoutStopSec=",
        "User=a2a-edge",
        "StateDirectory=",
        "ConfigurationDirectory=",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "NoNewPrivileges=yes",
        "ProtectKernelTunables=yes",
        "ProtectControlGroups=yes",
        "ProtectClock=yes",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
        "SystemCallFilter=@system-service",
        "CapabilityBoundingSet=\n",
        "UMask=0077",
        "LimitNOFILE=",
    ):
        assert line in text, line


def test_example_config_is_valid_and_the_defaults() -> None:
    example = UNIT.parent / "config.example.toml"
    settings = load_settings(example, environ={})
    assert settings.state_dir == "/var/lib/a2a-edge"
    assert [i.name for i in settings.offline.intents] == ["stop", "dock"]


def keys_of(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key of the settings, sections' keys included."""
    keys = []
    for name, field in model.model_fields.items():
        keys.append(prefix + name)
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel) and name != "intents":
            keys += keys_of(kind, f"{prefix}{name}.")
    return keys


def example_keys(text: str) -> set[str]:
    """The dotted keys the example file sets or names (a commented `# key = …` counts for a
    table-valued key such as privacy.categories, whose default is empty)."""
    found, section = set(), ""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if match := re.match(r"^\[\[?([a-z_.]+)\]\]?$", line):
            section = match.group(1) + "."
            parts = match.group(1).split(".")
            found.update(".".join(parts[: i + 1]) for i in range(len(parts)))
        elif match := re.match(r"^([a-z_]+)\s*=", line):
            found.add(section + match.group(1))
    return found


def test_example_config_names_every_key_with_its_default() -> None:
    example = UNIT.parent / "config.example.toml"
    missing = set(keys_of(Settings)) - example_keys(example.read_text(encoding="utf-8"))
    assert missing == set(), f"config.example.toml lacks {sorted(missing)}"
    assert load_settings(example, environ={}) == Settings()  # "every key with its default"


def test_unit_bounds_resources_and_reloads_without_procps() -> None:
    text = UNIT.read_text()
    for line in ("Wants=network-online.target mosquitto.service", "MemoryMax=", "TasksMax="):
        assert line in text, line
    # a PUI cancel ahead of the robot's busy processes (bench.loaded); no CPUWeight=, which
    # would confine nice to the unit's own cgroup
    assert re.search(r"^Nice=-\d+$", text, re.M) and not re.search("^CPUWeight=", text, re.M)
    assert re.search(r"^After=.*\bmosquitto\.service\b", text, re.M)
    reload = re.search(r"^ExecReload=(.*)$", text, re.M)
    assert reload and "/bin/kill" not in reload.group(1)  # procps is not on a minimal Debian
    assert reload.group(1).split()[:2] == ["/opt/a2a-edge/.venv/bin/a2a-edge", "reload"]


def test_the_readme_config_block_names_every_key_and_parses_to_the_defaults(tmp_path: Path) -> None:
    readme = (UNIT.parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    missing = set(keys_of(Settings)) - example_keys(block)
    assert missing == set(), f"README's config block lacks {sorted(missing)}"
    (tmp_path / "c.toml").write_text(block, encoding="utf-8")
    assert load_settings(tmp_path / "c.toml", environ={}) == Settings()
