"""The settings a running service shows through its heartbeat (edge/config/service_view.py):
what an operator needs to tell how it connects, and no secret."""

from __future__ import annotations

import json

from edge.config.service_view import service_settings
from edge.config.settings import Settings


def test_the_view_says_how_the_service_connects_and_holds_no_secret() -> None:
    settings = Settings.model_validate(
        {
            "device_id": "robot-9",
            "cloud": {
                "base_url": "https://planner:s3cr3t-pw@cloud.example.com:8443/api?key=k3y-in-url",
                "token_file": "/etc/a2a-edge/cloud-token-file",
                "verify_tls": False,
            },
            "mqtt": {
                "host": "10.0.0.2",
                "port": 8883,
                "username": "edge-user-name",
                "password_file": "/etc/a2a-edge/mqtt-password-file",
                "tls_ca_file": "/etc/a2a-edge/ca.crt",
                "tls_cert_file": "/etc/a2a-edge/edge.crt",
                "tls_key_file": "/etc/a2a-edge/edge-key-file.pem",
            },
            "storage": {"max_wal_mb": 3},
        }
    )
    shown = service_settings(settings)
    assert shown["cloud_tls"] == "NOT verified"
    assert shown["cloud_url"] == "https://cloud.example.com:8443/api"
    assert shown["cloud_token"] is True and shown["mqtt_user"] is True
    assert shown["mqtt_broker"] == "10.0.0.2:8883" and shown["mqtt_tls"] == "mutual"
    assert shown["max_wal_mb"] == 3 and shown["device_id"] == "robot-9"
    text = json.dumps(shown)
    for secret in ("s3cr3t-pw", "k3y-in-url", "token-file", "password-file", "key-file"):
        assert secret not in text, secret
    assert "edge-user-name" not in text  # whether one is set, not who


def test_plain_http_and_no_tls_are_named() -> None:
    shown = service_settings(Settings.model_validate({"cloud": {"base_url": "http://[::1]:18080"}}))
    assert (shown["cloud_tls"], shown["cloud_url"]) == ("plain http", "http://[::1]:18080")
    assert shown["mqtt_tls"] == "off" and shown["cloud_token"] is False
