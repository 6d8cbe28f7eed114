"""MQTT over TLS with client certificates and a password, against a Mosquitto whose CA the
test makes; a runtime that trusts another CA must not connect."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess, write_config
from tests.conftest import DEVICE, ROOT, eventually


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


# P-256 keys: made in a millisecond, where an RSA-2048 key took 0.3-1.5 s of a loaded 2-core
# machine, for each of the suite's dozen keys (tests/cloud_client/test_tls.py reads an RSA one)
NEW_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")


def make_ca(d: Path, name: str) -> None:
    openssl(
        "req",
        "-x509",
        *NEW_KEY,
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-subj",
        f"/CN={name}",
        cwd=d,
    )


def make_cert(d: Path, ca: str, name: str, cn: str) -> None:
    openssl(
        "req",
        *NEW_KEY,
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        f"/CN={cn}",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.crt",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        cwd=d,
    )


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    d = tmp_path / "pki"
    d.mkdir()
    make_ca(d, "ca")
    make_ca(d, "other-ca")
    make_cert(d, "ca", "server", "localhost")
    make_cert(d, "ca", "client", DEVICE)
    (d / "password").write_text("s3cret-pw\n")
    subprocess.run(
        ["mosquitto_passwd", "-b", "-c", str(d / "passwd"), "robot", "s3cret-pw"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return d


@pytest.fixture
def tls_broker(tmp_path: Path, pki: Path) -> Iterator[Mosquitto]:
    broker = Mosquitto(
        tmp_path / "tls-broker",
        password_file=pki / "passwd",
        tls={
            "cafile": str(pki / "ca.crt"),
            "certfile": str(pki / "server.crt"),
            "keyfile": str(pki / "server.key"),
            "require_certificate": "true",
        },
    )
    broker.start()
    yield broker
    broker.kill()


def runtime(
    tmp_path: Path, broker: Mosquitto, cloud: SimCloud, pki: Path, ca: str
) -> RuntimeProcess:
    config = write_config(
        tmp_path / f"config-{ca}.toml",
        {
            "device_id": DEVICE,
            "state_dir": str(tmp_path / f"state-{ca}"),
            "mqtt": {
                "port": broker.port,
                "tls_ca_file": str(pki / f"{ca}.crt"),
                "tls_cert_file": str(pki / "client.crt"),
                "tls_key_file": str(pki / "client.key"),
                "username": "robot",
                "password_file": str(pki / "password"),
                "reconnect_max_s": 1,
            },
            "cloud": {"base_url": cloud.url},
            "log": {"level": "DEBUG"},
        },
    )
    return RuntimeProcess(config, tmp_path / f"run-{ca}")


def test_mutual_tls_with_a_password(
    tmp_path: Path, tls_broker: Mosquitto, cloud: SimCloud, pki: Path
) -> None:
    proc = runtime(tmp_path, tls_broker, cloud, pki, "ca")
    (tmp_path / "run-ca").mkdir()
    probe = MqttProbe(
        tls_broker.port,
        [f"{ROOT}/#"],
        auth=("robot", "s3cret-pw"),
        tls=(str(pki / "ca.crt"), str(pki / "client.crt"), str(pki / "client.key")),
        root=ROOT,
    )
    try:
        proc.start()
        probe.wait_for(f"{ROOT}/runtime/status", lambda b: b.get("state") == "online")
        reply = probe.turn("t-tls", "안녕")
        assert reply["status"] == "ok"
        assert "s3cret-pw" not in proc.log()
    finally:
        probe.close()
        proc.close()


def test_a_broker_signed_by_another_ca_is_refused(
    tmp_path: Path, tls_broker: Mosquitto, cloud: SimCloud, pki: Path
) -> None:
    proc = runtime(tmp_path, tls_broker, cloud, pki, "other-ca")
    (tmp_path / "run-other-ca").mkdir()
    try:
        proc.start()  # READY: the DB is fine; the broker is not trusted
        time.sleep(0.1)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert "broker connected" not in proc.log()
            time.sleep(0.2)
        assert proc.proc is not None and proc.proc.poll() is None  # up, still trying
        eventually(
            lambda: (
                "CERTIFICATE_VERIFY_FAILED" in proc.log()
                or "certificate verify failed" in proc.log()
            ),
            5,
        )
    finally:
        proc.close()
