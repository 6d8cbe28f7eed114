"""The values `/metrics` reads from the running service when scraped: the state DB's counts,
the replayer's acked writes, the broker and the cloud as the runtime sees them."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import Metric

from edge.app.device import DeviceApp
from edge.host.metrics import Labels, Reader, counter, gauge


def state_reader(
    app: DeviceApp, loop_lag: Callable[[], float], broker_up: Callable[[], bool]
) -> Reader:
    def read() -> Iterable[Metric]:
        now = app.gauges()
        workflows: dict[Labels, float] = {
            (("status", status),): float(n) for status, n in now["workflows"].items()
        }
        if workflows:
            yield gauge("a2a_workflows", "workflows in the state DB by status", workflows)
        yield gauge(
            "a2a_mqtt_outbox_depth",
            "MQTT messages owed (no PUBACK yet)",
            {(): now["mqtt_outbox"]},
        )
        yield gauge(
            "a2a_sync_outbox_depth", "sync writes owed to the cloud", {(): now["sync_outbox"]}
        )
        yield gauge(
            "a2a_dead_letters",
            "dead letters kept: sync writes the cloud refused for good, inbound messages a"
            " handler failed on",
            {
                (("queue", "sync"),): now["sync_dead"],
                (("queue", "inbound"),): now["inbound_dead"],
            },
        )
        yield counter(
            "a2a_sync_acked", "sync writes the cloud acked since start", now["sync_acked"]
        )
        yield gauge(
            "a2a_loop_lag_seconds", "how late the loop's last timer fired", {(): loop_lag()}
        )
        yield gauge(
            "a2a_broker_connected",
            "1 while the broker connection is up",
            {(): 1.0 if broker_up() else 0.0},
        )
        agents: dict[Labels, float] = {
            (("capability_id", a.capability_id), ("known", "1" if a.known else "0")): (
                1.0 if a.state == "online" else 0.0
            )
            for a in app.tm.agents.all.values()
        }
        if agents:  # SPEC 4.8: each agent's last status, 1 online, 0 offline
            yield gauge("a2a_agent_online", "1 while an agent's last status says online", agents)
        yield gauge(
            "a2a_cloud_reachable",
            "1 while the cloud is taken as reachable (0: turns are answered offline at once)",
            {(): 1.0 if now["cloud_reachable"] else 0.0},
        )

    return read
