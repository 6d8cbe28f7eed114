"""`a2a-edge demo`: a broker, the sim cloud and the runtime on this machine; one turn, printed."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess, write_config

DEVICE = "robot-001"
ROOT = f"a2a/{DEVICE}"
SCRIPT = ["안녕", "오늘 저녁에 거실 청정해줘"]


def say(text: str) -> None:
    print(text, flush=True)


def _for_turn(turn_id: str) -> Callable[[Any], bool]:
    return lambda body: isinstance(body, dict) and body.get("turn_id") == turn_id


def run_demo(verbose: bool = False) -> int:
    with tempfile.TemporaryDirectory(prefix="a2a-demo-") as tmp:
        work = Path(tmp)
        try:
            broker = Mosquitto(work / "broker")
            broker.start()
        except RuntimeError as exc:
            say(f"demo: {exc}")
            return 1
        cloud = SimCloud().start()
        say(f"· broker  mosquitto on 127.0.0.1:{broker.port}")
        say(f"· cloud   sim planner on {cloud.url}")
        config = write_config(
            work / "config.toml",
            {
                "device_id": DEVICE,
                "state_dir": str(work / "state"),
                "mqtt": {"port": broker.port, "reconnect_min_s": 0.5, "reconnect_max_s": 2},
                "cloud": {"base_url": cloud.url},
                "log": {"level": "DEBUG" if verbose else "INFO"},
            },
        )
        runtime = RuntimeProcess(config, work)
        probe: MqttProbe | None = None
        try:
            runtime.start()
            say(f"· runtime a2a-edge run (pid {runtime.proc.pid if runtime.proc else '?'}) READY")
            probe = MqttProbe(broker.port, [f"{ROOT}/turn/response", f"{ROOT}/runtime/status"])
            probe.wait_for(f"{ROOT}/runtime/status", lambda b: b.get("state") == "online")
            for n, text in enumerate(SCRIPT, start=1):
                turn_id = f"demo-turn-{n}"
                say(f"\n사용자 ▶ {text}")
                probe.publish(f"{ROOT}/turn/request", {"turn_id": turn_id, "recognized_text": text})
                reply = probe.wait_for(f"{ROOT}/turn/response", _for_turn(turn_id))
                say(
                    f"로봇   ◀ {reply['assistant_text']}  "
                    f"[status={reply['status']} route={reply['route_family']}]"
                )
            turns = cloud.requests("/v1/a2a/turn")
            snapshot = turns[-1]["body"]["voice_context"]["memory_snapshot"]
            say(
                f"\n· the cloud saw {len(turns)} turns; the last carried a memory snapshot with "
                f"{len(snapshot['short_term']['recent_pairs'])} recent pair(s), "
                f"sync {snapshot['sync']}"
            )
            code = runtime.terminate()
            say(f"· runtime stopped on SIGTERM with exit code {code}")
            return 0 if code == 0 else 1
        except (RuntimeError, TimeoutError) as exc:
            say(f"demo failed: {exc}")
            if verbose or runtime.log_path.exists():
                sys.stderr.write(runtime.log()[-4000:])
            return 1
        finally:
            if probe is not None:
                probe.close()
            runtime.close()
            cloud.stop()
            broker.stop()
