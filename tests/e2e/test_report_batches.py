"""Terminal reports batched through the real process (SPEC §3.3's batch form, issue 36): 20
workflows ending while a report is in flight reach the sim cloud in fewer requests than reports,
each once; a cloud that refuses the form (404) gets them one by one, none through the replay; a
power cut with a batch sent and its answer not read loses none, and the replay's copies carry
the same request_ids, so the cloud applies each once."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sim.cloud import SimCloud
from sim.devices import DeviceAgents
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually

COUNT = 20
REPORTS = 2 * COUNT  # each workflow: its step's COMPLETED, then WORKFLOW_COMPLETED
EVENTS = "/v1/a2a/workflow/events"
PATIENT = {"cloud": {"read_timeout_s": 60}, "taskmanager": {"events_deadline_s": 120}}


def one_step(n: int) -> dict[str, Any]:
    step = {"step_id": "say", "capability_id": "speaker", "operation_id": "say"}
    return {
        "workflow_id": f"wf-batch-{n:02d}",
        "plan_id": "bench",
        "steps": [{**step, "args": {"text": "안녕하세요"}}],
    }


def arrived(cloud: SimCloud) -> Counter[tuple[str, str]]:
    """(workflow_id, status) of every terminal report the cloud received, by either road."""
    events = [r["body"] or {} for r in cloud.requests(EVENTS)]
    kept = [w["payload"] for w in cloud.synced() if w["kind"] == "task_terminal"]
    return Counter(
        (str(b.get("workflow_id")), str((b.get("event") or {}).get("status")))
        for b in (*events, *kept)
    )


def every_report() -> set[tuple[str, str]]:
    return {
        (f"wf-batch-{n:02d}", status)
        for n in range(COUNT)
        for status in ("COMPLETED", "WORKFLOW_COMPLETED")
    }


def ended_with_a_report_in_flight(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> RuntimeProcess:
    """20 workflows end while the cloud holds the answer to the first request (the reports of
    the first workflow's commit): the others wait in the device."""
    cloud.hold_answers("events")
    runtime = runtime_factory(**PATIENT)
    for n in range(COUNT):
        probe.publish(f"{ROOT}/workflow/request", one_step(n))
    eventually(
        lambda: (
            state_rows("SELECT count(*) FROM workflows WHERE status = 'completed'")[0][0] == COUNT
        ),
        timeout_s=30,
    )
    eventually(lambda: cloud.held() == 1)
    assert len(cloud.posts(EVENTS)) == 1  # the rest wait behind it
    return runtime


def test_twenty_workflows_ending_at_once_reach_the_cloud_in_fewer_requests(
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    ended_with_a_report_in_flight(runtime_factory, cloud, probe, state_rows)
    cloud.hold_answers(None)
    eventually(lambda: len(cloud.reports()) == REPORTS, timeout_s=30)
    sizes = [p["reports"] for p in cloud.posts(EVENTS)]
    print("reports per request:", sizes)
    assert len(sizes) < REPORTS and sum(sizes) == REPORTS  # e.g. 3 requests: 2 + 32 + 6
    assert set(cloud.reports().values()) == {1}  # each report once
    assert set(arrived(cloud)) == every_report() and set(arrived(cloud).values()) == {1}
    eventually(lambda: state_rows("SELECT count(*) FROM reports_owed")[0][0] == 0)


def test_a_cloud_refusing_batches_gets_single_events_from_then_on(
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    cloud.batch_faults(refuse=404)
    ended_with_a_report_in_flight(runtime_factory, cloud, probe, state_rows)
    cloud.hold_answers(None)
    eventually(lambda: len(cloud.reports()) == REPORTS, timeout_s=30)
    sizes = [p["reports"] for p in cloud.posts(EVENTS)]
    refused = [s for s in sizes if s > 1]
    assert len(refused) == 1  # one batch tried (the first request's, or the next), refused
    assert sizes.count(1) == REPORTS  # then every report alone, the refused ones too
    assert set(sizes[sizes.index(refused[0]) + 1 :]) == {1}  # remembered
    assert set(cloud.reports().values()) == {1}
    assert not [w for w in cloud.synced() if w["kind"] == "task_terminal"]  # none replayed


def test_a_power_cut_between_a_batch_and_its_answer_loses_no_report(
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
) -> None:
    runtime = ended_with_a_report_in_flight(runtime_factory, cloud, probe, state_rows)
    cloud.let_go(1)  # the first request's answer goes; the next request's is held
    eventually(lambda: cloud.held() == 1 and len(cloud.posts(EVENTS)) == 2)
    first, in_flight = (p["reports"] for p in cloud.posts(EVENTS))
    assert in_flight > 1  # a batch
    assert len(cloud.reports()) == first + in_flight  # the cloud took it: no answer read
    runtime.kill()
    cloud.hold_answers(None)
    runtime_factory()  # the owed reports go through the replay, with their request_ids
    eventually(lambda: set(arrived(cloud)) == every_report(), timeout_s=30)

    def again() -> int:  # reports the cloud received a second time (by their request_id)
        return sum(cloud.reports().values()) - len(cloud.reports())

    # every report may have reached the cloud before the cut (the worker lingers for more,
    # so the first request can hold most of them): wait for the replay of the unanswered batch
    eventually(lambda: again() >= in_flight, timeout_s=30)
    assert len(cloud.reports()) == REPORTS  # no report got a new request_id on the way back
    eventually(lambda: state_rows("SELECT count(*) FROM reports_owed")[0][0] == 0)
