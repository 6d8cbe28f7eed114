"""Fuzzed MQTT input on every inbound topic, through the real process: no crash, no state
change, every payload refused on P/runtime/error, memory bounded. CI runs 333 payloads (1,000
with `A2A_HYPOTHESIS_PROFILE=ci-deep`, tests/examples.py); the full run
(`A2A_FUZZ_PAYLOADS=100000`) is part of run_full.sh."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually
from tests.examples import examples
from tests.reliability.payloads import INBOUND, hostile

COUNT = int(os.environ.get("A2A_FUZZ_PAYLOADS") or examples(1000))
TABLES = (
    "pairs",
    "sessions",
    "profile_items",
    "workflows",
    "sync_outbox",
    "inbox_seen",
    "device_state",
    "memory_audit",
    "consent_grants",
    "consent_audit",
)


def counts(state_rows: StateRows) -> dict[str, int]:
    out = {t: state_rows(f"SELECT count(*) FROM {t}")[0][0] for t in TABLES}
    # the service's own heartbeat is not the input's doing
    out["device_state"] = state_rows(
        "SELECT count(*) FROM device_state WHERE key != 'runtime_heartbeat'"
    )[0][0]
    return out


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_fuzzed_payloads_are_all_refused(
    state_rows: StateRows, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime = runtime_factory(log={"level": "WARNING"})
    assert runtime.proc is not None
    before, rss_before = counts(state_rows), rss_kb(runtime.proc.pid)
    sent: list[str] = []
    per_topic = max(1, COUNT // len(INBOUND))

    @settings(
        max_examples=per_topic * len(INBOUND),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.sampled_from(INBOUND).flatmap(lambda t: st.tuples(st.just(t), hostile(t))))
    def publish(case: tuple[str, bytes]) -> None:
        topic, payload = case
        probe.publish(f"{ROOT}/{topic}", payload)  # QoS 1: the broker keeps the order
        sent.append(topic)

    publish()
    refused = eventually(
        lambda: (
            len(probe.messages(f"{ROOT}/runtime/error")) >= len(sent)
            and probe.messages(f"{ROOT}/runtime/error")
        ),
        120,
    )
    assert runtime.proc.poll() is None  # still up
    assert len(refused) == len(sent)
    assert {r["error"] for r in refused} <= {
        "invalid_json",
        "not_an_object",
        "payload_too_large",
        "missing_field",
        "invalid_field",
        "unknown_task",
    }
    assert counts(state_rows) == before  # nothing changed
    grown = rss_kb(runtime.proc.pid) - rss_before
    print(f"fuzzed {len(sent)} payloads; RSS {rss_before} kB -> +{grown} kB")
    assert grown < 50_000
    assert probe.turn("t-after", "안녕")["status"] == "ok"
