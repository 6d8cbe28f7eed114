"""A hostile or misconfigured cloud peer (issue 16 items 1 and 4), through the real process:
a body of hundreds of megabytes costs a closed connection, not the memory; TLS is never off
without a warning, a token never goes over plain http to another host unless allowed, and a
certificate that fails is told as a TLS failure, naming the certificate.

`A2A_HUGE_BODY_MB` (default 200) sets the hostile body's size; keep it well past what the
sockets buffer (a few MB), or the server may send it all before the runtime hangs up. The
runtime's growth does not depend on it (measured: +3.3 MB at 2, 200 and 1,000 MB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sim.probe import MqttProbe
from sim.processes import RuntimeProcess, write_config
from tests.conftest import RuntimeFactory, StateRows, eventually
from tests.e2e.test_tls import make_ca
from tests.reliability.files import edge_cli
from tests.reliability.peers import HugeBodies, TlsCloud, memory_of

TURN = "/v1/a2a/turn"
SYNC = "/v1/a2a/memory/sync"
HUGE = int(os.environ.get("A2A_HUGE_BODY_MB", "200")) * 1024 * 1024
FAST_SYNC = {"deadline_s": 2.0, "max_backoff_s": 0.3}
GROWTH_KB = 6 * 1024  # "a few MB": a 1 MiB cap, its copy, a parse, allocator slack


def pid_of(runtime: RuntimeProcess) -> int:
    assert runtime.proc is not None
    return runtime.proc.pid


def cli_json(runtime: RuntimeProcess, *args: str, env: dict[str, str] | None = None) -> Any:
    """A read command's JSON, with the service's config (and `env`: its overrides)."""
    done = subprocess.run(
        [sys.executable, "-m", "edge", *args, "--json", "--config", str(runtime.config)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_huge_cloud_body_is_never_read_whole(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    with HugeBodies(HUGE) as cloud:
        runtime = runtime_factory(
            cloud_url=cloud.url, cloud={"turn_deadline_s": 5.0}, sync=FAST_SYNC
        )
        assert probe.turn("t-warm", "안녕")["status"] == "error"  # a small wrong answer
        before = memory_of(pid_of(runtime))
        replies = {}
        for mode in ("length", "chunked"):
            cloud.mode = mode
            replies[mode] = probe.turn(f"t-{mode}", "안녕", timeout_s=20)
        eventually(lambda: len(cloud.answers(TURN)) == 2, 10)
        eventually(lambda: cloud.answers(SYNC), 10)  # the replay met one too
        after = memory_of(pid_of(runtime))
        print(
            f"huge body ({HUGE // 2**20} MB): RSS {before.rss_kb} -> {after.rss_kb} kB, "
            f"peak {before.hwm_kb} -> {after.hwm_kb} kB; sent before the close: "
            + ", ".join(f"{s.path} {s.mode} {s.bytes_sent}" for s in cloud.answers(TURN))
        )
        assert after.hwm_kb - before.hwm_kb < GROWTH_KB
        assert after.rss_kb - before.rss_kb < GROWTH_KB
        for reply in replies.values():
            assert reply["status"] == "error", reply
            assert "too large" in reply["error"] and "1048576" in reply["error"], reply
        assert f"Content-Length {HUGE} bytes" in replies["length"]["error"]
        assert all(not sent.finished for sent in cloud.answers(TURN) + cloud.answers(SYNC))
        sync = cli_json(runtime, "sync", "status")
        assert "too large" in sync["last_error"], sync
        assert "too large" in probe.turn("t-after", "안녕")["error"]  # still answering


def token_file(tmp_path: Path) -> str:
    token = tmp_path / "token"
    token.write_text("tok-123\n")
    token.chmod(0o600)
    return str(token)


def test_a_token_over_plain_http_to_another_host_is_refused(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        {
            "state_dir": str(tmp_path / "state"),
            "cloud": {
                "base_url": "http://planner.example.com:8080",
                "token_file": token_file(tmp_path),
            },
        },
    )
    done = edge_cli("run", "--config", str(config), timeout_s=15)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        "a2a-edge: config error: cloud.base_url: plain http to planner.example.com would send"
    )
    assert "cloud.allow_insecure = true" in lines[0] and "tok-123" not in lines[0]
    assert not (tmp_path / "state").exists()  # refused before anything was opened


def warnings_in(runtime: RuntimeProcess) -> list[str]:
    return [line for line in runtime.log().splitlines() if " WARNING " in line]


def test_tls_verification_off_is_warned_at_start_and_shown_in_status(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    pki = tmp_path / "pki"
    pki.mkdir()
    make_ca(pki, "planner")
    env = {"A2A_EDGE_CLOUD__VERIFY_TLS": "false"}
    with TlsCloud(pki / "planner.crt", pki / "planner.key") as server:
        runtime = runtime_factory(cloud_url=server.url, env=env)
        unverified = [w for w in warnings_in(runtime) if "NOT verified" in w]
        assert unverified and "cloud.verify_tls = false" in unverified[0], runtime.log()
        assert "pose as the planner at 127.0.0.1" in unverified[0]
        assert cli_json(runtime, "status", env=env)["cloud_tls"] == "NOT verified"
        # without the override: the service's view still (its heartbeat's), not this command's
        # (before: `verified`, the CLI's own)
        shown = eventually(
            lambda: (s := cli_json(runtime, "status"))["heartbeat_age_s"] is not None and s, 15
        )
        assert shown["cloud_tls"] == "NOT verified", shown
        assert shown["settings_from"] == "service"
        assert shown["settings"]["cloud_tls"] == "NOT verified"
        assert shown["config_differs"] == ["cloud_tls"]  # the CLI's config says otherwise
        assert shown["settings"]["cloud_url"] == server.url


def test_clear_text_allowed_is_warned_at_every_start_and_shown_in_status(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    cloud = {"token_file": token_file(tmp_path), "allow_insecure": True}
    runtime = runtime_factory(cloud_url="http://192.0.2.7:18080", cloud=cloud)
    runtime.terminate()
    runtime = runtime_factory(cloud_url="http://192.0.2.7:18080", cloud=cloud)
    clear = [w for w in warnings_in(runtime) if "cloud over plain http to 192.0.2.7" in w]
    allowed = [w for w in warnings_in(runtime) if "cloud.allow_insecure = true" in w]
    assert len(clear) == 2 and len(allowed) == 2, runtime.log()  # once for each start
    assert "the cloud token and every turn travel in clear text" in clear[0]
    assert cli_json(runtime, "status")["cloud_tls"] == "plain http"


def test_a_certificate_that_fails_is_told_as_a_tls_failure(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    pki = tmp_path / "pki"
    pki.mkdir()
    make_ca(pki, "evil-planner")  # self-signed, CN=evil-planner
    with TlsCloud(pki / "evil-planner.crt", pki / "evil-planner.key") as server:
        runtime = runtime_factory(cloud_url=server.url, sync=FAST_SYNC)
        reply = probe.turn("t-tls", "안녕")
        port = server.server_address[1]
        why = (
            "tls: certificate verify failed: self-signed certificate (certificate"
            f" CN=evil-planner; issuer CN=evil-planner) at 127.0.0.1:{port}"
        )
        assert reply["status"] == "offline", reply
        assert reply["error"] == f"cloud_unavailable: {why}"
        assert any(why in line for line in warnings_in(runtime)), runtime.log()
        eventually(lambda: state_rows("SELECT value FROM sync_meta WHERE key = 'last_error'"), 10)
        assert why in cli_json(runtime, "sync", "status")["last_error"]
        assert cli_json(runtime, "status")["cloud_tls"] == "verified"
        assert server.requests == 0  # nothing, and no token, went through
