"""The running service's /metrics in Prometheus conventions (issue 21): what a fleet's
Prometheus scrapes and aggregates."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from sim.broker import free_port
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory


def scrape(port: int) -> tuple[dict[str, str], dict[str, float]]:
    """(family name -> type, `name{k="v",…}` with sorted labels -> value)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    types, values = {}, {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            values[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return types, values


def test_the_service_exposes_counters_histograms_and_the_standard_collectors(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    port = free_port()
    runtime_factory(metrics={"enabled": True, "port": port})
    assert probe.turn("t-1", "안녕")["status"] == "ok"
    probe.publish(f"{ROOT}/turn/request", b'{"turn_id": "t-bad", "recognized_text": 5}')
    probe.wait_for(f"{ROOT}/turn/response", lambda b: b.get("turn_id") == "t-bad")
    types, values = scrape(port)
    assert types["a2a_sync_acked"] == "counter"  # the family; its sample is a2a_sync_acked_total
    assert "a2a_sync_acked_total" in values
    for name in ("a2a_turn_device_seconds", "a2a_turn_phase_seconds", "a2a_inbound_batch_messages"):
        assert types[name] == "histogram", name
    assert "summary" not in types.values()
    assert values['a2a_turns_total{status="ok"}'] == 1
    assert values['a2a_refusals_total{error="invalid_field",topic="turn/request"}'] == 1
    assert values["a2a_cloud_reachable"] == 1 and values["a2a_broker_connected"] == 1
    assert values['a2a_dead_letters{queue="inbound"}'] == 0
    assert values['a2a_dead_letters{queue="sync"}'] == 0
    assert values["process_resident_memory_bytes"] > 10e6 and values["process_open_fds"] > 5
    assert [k for k in values if k.startswith("a2a_build_info{")]
    assert [k for k in values if k.startswith("python_info{")]
