"""`a2a-edge demo | sim …`: the whole loop on one machine, and the reference counterparts
(cloud planner, device agents) for development and tests. `sim/` is imported only here, lazily."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time

from edge.cli.kit import Subparsers, UsageError, command, group, positive_float


def cmd_demo(args: argparse.Namespace) -> int:
    from sim.demo import run_demo

    return run_demo(as_json=args.json, keep=args.keep, verbose=args.verbose, broker=args.broker)


def cmd_sim_cloud(args: argparse.Namespace) -> int:
    from sim.cloud import serve_forever
    from sim.cloud_state import Faults

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    faults = Faults(
        latency_s=args.latency_s, status=args.status, drop=args.down, malformed=args.malformed
    )
    serve_forever(args.host, args.port, faults)
    return 0


def cmd_sim_devices(args: argparse.Namespace) -> int:
    import signal
    import threading

    from sim.devices import DeviceAgents, served
    from sim.world import World

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    root = f"{args.prefix}/{args.device_id}"
    try:
        served(args.only, args.exclude)
    except ValueError as exc:
        raise UsageError(f"sim devices --only: {exc}") from None
    world = World(current_room=args.room, battery=args.battery, time_scale=args.time_scale)
    agents = DeviceAgents(
        args.port,
        root,
        host=args.host,
        world=world,
        protocol=args.protocol,
        only=args.only,
        exclude=args.exclude,
    )
    serves = ", ".join(agents.capabilities).replace("*", "every capability")
    print(f"sim devices for {root} on {args.host}:{args.port}: {serves}", file=sys.stderr)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    agents.close()
    return 0


def cmd_sim_observe(args: argparse.Namespace) -> int:
    """One observation (or a fault's worth) on `P/observation`, from the sim perception agent."""
    from sim.perception import PerceptionAgent

    agent = PerceptionAgent(
        args.port, f"{args.prefix}/{args.device_id}", host=args.host, room=args.room
    )
    try:
        if args.kind == "noise":
            ids = agent.noise(args.level, fault=args.fault, requires_cloud_decision=args.decide)
        else:
            ids = agent.air_quality(
                args.level, fault=args.fault, requires_cloud_decision=args.decide
            )
        time.sleep(0.5)  # a CLI of the simulator: let paho hand the QoS 1 messages over
    finally:
        agent.close()
    print(f"sent {len(ids)} {args.kind} observation(s): {ids[0]}{' …' if len(ids) > 1 else ''}")
    return 0


def _add_sim_observe(sim: Subparsers) -> None:
    observe = command(
        sim,
        "observe",
        "a perception agent's observation on P/observation (noise or air quality in a room)",
        cmd_sim_observe,
        config=False,
        json=False,
    )
    observe.add_argument("kind", choices=["noise", "air_quality"], help="what was observed")
    observe.add_argument("level", type=float, help="dB of noise, or PM2.5 in µg/m³")
    observe.add_argument("--room", default="거실", help="where it was observed")
    observe.add_argument(
        "--fault", choices=["stale", "out_of_scope", "future", "flood"], default=None,
        help="send it wrong on purpose",
    )  # fmt: skip
    observe.add_argument(
        "--decide", action="store_true", help="requires_cloud_decision: ask the supervisor"
    )
    observe.add_argument("--host", default="127.0.0.1", help="the broker's address")
    observe.add_argument("--port", type=int, default=1883, help="the broker's port")
    observe.add_argument("--prefix", default="a2a", help="the topic prefix (mqtt.topic_prefix)")
    observe.add_argument("--device-id", default="robot-001", help="the robot's device_id")


def _add_demo(sub: Subparsers) -> None:
    demo = command(
        sub,
        "demo",
        "the whole scripted conversation on this machine (broker, sim cloud, devices, runtime)",
        cmd_demo,
        config=False,
        json=False,
        description="Start a broker, the reference cloud planner, simulated device agents and"
        " the runtime in a temporary state dir, and play six scenes (twelve turns): a room"
        " workflow, a follow-up from memory, a PUI cancel, the cloud going down and coming"
        " back, and a preference learnt over six simulated days. Prints a timeline and a"
        " summary; exits 0 and leaves nothing running.",
    )
    demo.add_argument(
        "--json", action="store_true", help="print the events and the summary as JSON lines"
    )
    demo.add_argument(
        "--verbose", action="store_true", help="show the runtime's log as it is written"
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the state dir (and print how to look at it)"
    )
    demo.add_argument(
        "--broker",
        choices=["auto", "mosquitto", "embedded"],
        default="auto",
        help="auto: Mosquitto when installed, else the embedded broker (MQTT 3.1.1)",
    )


def _add_sim_cloud(sim: Subparsers) -> None:
    cloud = command(
        sim, "cloud", "the reference cloud planner (HTTP)", cmd_sim_cloud, config=False, json=False
    )
    cloud.add_argument("--host", default="127.0.0.1", help="address to listen on")
    cloud.add_argument("--port", type=int, default=18080, help="port to listen on")
    cloud.add_argument(
        "--latency-s", type=float, default=0.0, metavar="S", help="delay every answer"
    )
    cloud.add_argument(
        "--status",
        type=int,
        default=None,
        metavar="CODE",
        help="answer every request with this HTTP status (default: the planner's answers)",
    )
    cloud.add_argument(
        "--down", action="store_true", help="drop every connection (default: answer them)"
    )
    cloud.add_argument(
        "--malformed", action="store_true", help="answer truncated JSON (default: whole JSON)"
    )


def _add_sim_devices(sim: Subparsers) -> None:
    devices = command(
        sim,
        "devices",
        "device agents on MQTT (a simulated robot)",
        cmd_sim_devices,
        config=False,
        json=False,
    )
    devices.add_argument("--host", default="127.0.0.1", help="the broker's address")
    devices.add_argument("--port", type=int, default=1883, help="the broker's port")
    devices.add_argument(
        "--protocol", choices=["5", "3.1.1"], default="5", help="MQTT protocol version"
    )
    devices.add_argument("--prefix", default="a2a", help="the topic prefix (mqtt.topic_prefix)")
    devices.add_argument("--device-id", default="robot-001", help="the robot's device_id")
    devices.add_argument("--room", default="거실", help="where the robot starts")
    devices.add_argument("--battery", type=float, default=82.0, help="battery level, percent")
    only = devices.add_mutually_exclusive_group()
    only.add_argument(
        "--only",
        nargs="+",
        default=[],
        metavar="CAPABILITY",
        help="simulate only these capabilities; no other is subscribed to (default: every one,"
        " and an operation not simulated is answered FAILED unsupported_operation)",
    )
    only.add_argument(
        "--exclude",
        nargs="+",
        default=[],
        metavar="CAPABILITY",
        help="simulate every capability but these, and subscribe to no other: your own agent"
        " serves them (default: none excluded)",
    )
    devices.add_argument(
        "--time-scale",
        type=positive_float,
        default=1.0,
        help="multiply every duration (0.1 = ten times faster)",
    )


def register(sub: Subparsers) -> None:
    _add_demo(sub)
    sim = group(sub, "sim", "reference counterparts for development and tests")
    _add_sim_cloud(sim)
    _add_sim_devices(sim)
    _add_sim_observe(sim)
