"""The settings a running service uses, as `a2a-edge status` shows them (SPEC §6): they travel
with its heartbeat (edge/runtime/health.py), because the CLI knows only the config file and the
environment it was itself given — a service started with `A2A_EDGE_CLOUD__VERIFY_TLS=false` was
shown `verified` by a CLI without that variable (issue 30)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from edge.config.settings import Settings


def service_settings(settings: Settings) -> dict[str, Any]:
    """What the running service uses, as an operator needs to see it in `a2a-edge status`
    (which otherwise knows only the config file and environment it was itself given): where
    it connects and how safely, and the bounds it keeps. No secret, nor a secret file's name:
    only whether one is set. Flat keys, the same names `status` shows."""
    cloud, mqtt = settings.cloud, settings.mqtt
    url = urlsplit(cloud.base_url)
    host = url.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{url.port}" if url.port is not None else ""
    mqtt_tls = "off"
    if mqtt.tls_ca_file:
        mqtt_tls = "mutual" if mqtt.tls_cert_file else "server verified"
    return {
        "device_id": settings.device_id,
        "cloud_url": urlunsplit((url.scheme, netloc, url.path, "", "")),  # no userinfo, query
        "cloud_tls": cloud.tls_mode,
        "cloud_token": bool(cloud.token_file),
        "cloud_allow_insecure": cloud.allow_insecure,
        "mqtt_broker": f"{mqtt.host}:{mqtt.port}",
        "mqtt_protocol": mqtt.protocol,
        "mqtt_tls": mqtt_tls,
        "mqtt_user": bool(mqtt.username),
        "topic_root": settings.topic_root,
        "max_wal_mb": settings.storage.max_wal_mb,
        "log_level": settings.log.level,
    }
