from __future__ import annotations

from pathlib import Path

import pytest

from edge.cli.entry import main
from edge.config.errors import ConfigError
from edge.config.settings import load_secrets, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_match_the_spec(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, ""), environ={})
    assert settings.device_id == "robot-001"
    assert settings.state_db_path == Path("/var/lib/a2a-edge/state.db")
    assert (settings.mqtt.host, settings.mqtt.port, settings.mqtt.protocol) == (
        "127.0.0.1",
        1883,
        "5",
    )
    assert settings.mqtt.topic_prefix == "a2a"
    assert settings.mqtt.keepalive_s == 30
    assert settings.mqtt.session_expiry_s == 86400
    assert settings.mqtt.max_payload_bytes == 65536
    assert settings.cloud.base_url == "http://127.0.0.1:18080"
    assert settings.cloud.turn_deadline_s == 4.0
    assert settings.memory.snapshot_budget_bytes == 4096
    assert settings.memory.recent_pairs == 6
    assert settings.memory.session_idle_s == 1800
    assert settings.memory.retention_days == 30
    assert settings.sync.batch_size == 100
    assert settings.storage.synchronous == "FULL"


def test_file_then_environment_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, 'device_id = "robot-7"\n[mqtt]\nport = 1884\nprotocol = "3.1.1"\n')
    env = {
        "A2A_EDGE_MQTT__PORT": "1999",
        "A2A_EDGE_DEVICE_ID": "robot-8",
        "A2A_EDGE_CLOUD__TURN_DEADLINE_S": "2.5",
        "UNRELATED": "x",
    }
    settings = load_settings(path, environ=env)
    assert settings.device_id == "robot-8"
    assert settings.mqtt.port == 1999
    assert settings.mqtt.protocol == "3.1.1"
    assert settings.cloud.turn_deadline_s == 2.5
    assert settings.topic_root == "a2a/robot-8"


@pytest.mark.parametrize(
    ("text", "env", "key"),
    [
        ("[mqtt]\nport = 70000\n", {}, "mqtt.port"),
        ('[mqtt]\nprotocol = "4"\n', {}, "mqtt.protocol"),
        ("[mqtt]\nportt = 1\n", {}, "mqtt.portt"),
        ("surprise = 1\n", {}, "surprise"),
        ("", {"A2A_EDGE_MEMORY__SNAPSHOT_BUDGET_BYTES": "lots"}, "memory.snapshot_budget_bytes"),
        ("", {"A2A_EDGE_DEVICE_ID": "bad id/with slash"}, "device_id"),
        ('[cloud]\nbase_url = "ftp://x"\n', {}, "cloud.base_url"),
        ('[storage]\nsynchronous = "OFF"\n', {}, "storage.synchronous"),
        ("[mqtt\n", {}, "--config"),
        ("[memory.promotion]\nwindow_days = 5\n", {}, "memory.promotion"),  # < auto_confirm_days
        ("[memory]\nsnapshot_standing_items = -1\n", {}, "memory.snapshot_standing_items"),
    ],
)
def test_bad_values_name_their_key(
    tmp_path: Path, text: str, env: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text), environ=env)
    assert info.value.key == key
    assert "\n" not in str(info.value)


def test_cli_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "[memory]\nrecent_pairs = -1\n")
    assert main(["run", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("a2a-edge: config error: memory.recent_pairs:")
    assert len(err.splitlines()) == 1


def test_secrets_come_from_files_and_are_not_shown(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("s3cret\n")
    (tmp_path / "token").write_text("tok-123")
    path = write(
        tmp_path,
        f'[mqtt]\nusername = "robot"\npassword_file = "{tmp_path / "pw"}"\n'
        f'[cloud]\ntoken_file = "{tmp_path / "token"}"\n',
    )
    secrets = load_secrets(load_settings(path, environ={}))
    assert secrets.mqtt_password == "s3cret"
    assert secrets.cloud_token == "tok-123"
    assert "s3cret" not in repr(secrets) and "tok-123" not in repr(secrets)


def test_missing_secret_file_names_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, f'[cloud]\ntoken_file = "{tmp_path / "absent"}"\n')
    with pytest.raises(ConfigError) as info:
        load_secrets(load_settings(path, environ={}))
    assert info.value.key == "cloud.token_file"


def test_the_readme_config_example_is_valid(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    settings = load_settings(write(tmp_path, block), environ={})
    assert [i.name for i in settings.offline.intents] == ["stop", "dock"]
    assert settings == load_settings(write(tmp_path, ""), environ={})  # it shows the defaults


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:99999", "http://127.0.0.1:port", "https://:8443/v1"]
)
def test_a_cloud_url_httpx_would_refuse_is_a_config_error(tmp_path: Path, url: str) -> None:
    """Before: a port out of range passed and the first request failed, every turn offline."""
    with pytest.raises(ConfigError, match=r"cloud\.base_url"):
        load_settings(write(tmp_path, f'[cloud]\nbase_url = "{url}"\n'), environ={})
