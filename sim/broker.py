"""A private Mosquitto on a free loopback port, which tests may stop, kill and restart."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

INSTALL_HINT = (
    "mosquitto is not installed: run `sudo apt-get install -y mosquitto` "
    "(the bootstrap script does this itself when run as root)"
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mosquitto_binary() -> str:
    found = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/sbin")
    if not found:
        raise RuntimeError(INSTALL_HINT)
    return found


def wait_port(port: int, *, up: bool, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                if up:
                    return True
        except OSError:
            if not up:
                return True
        time.sleep(0.02)
    return False


class Mosquitto:
    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        persistence: bool = True,
        extra_conf: str = "",
        tls: dict[str, str] | None = None,
        password_file: Path | None = None,
    ) -> None:
        """`tls`: cafile/certfile/keyfile (+ require_certificate) for the listener;
        `password_file`: a mosquitto_passwd file, and anonymous clients refused."""
        self.tls = tls or {}
        self.password_file = password_file
        self.workdir = workdir
        self.port = port or free_port()
        self.persistence = persistence
        self.extra_conf = extra_conf
        self._proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def conf_path(self) -> Path:
        return self.workdir / "mosquitto.conf"

    @property
    def log_path(self) -> Path:
        return self.workdir / "mosquitto.log"

    def _write_conf(self) -> None:
        lines = [
            f"listener {self.port} 127.0.0.1",
            *(f"{key} {value}" for key, value in self.tls.items()),
            "allow_anonymous false" if self.password_file else "allow_anonymous true",
            *([f"password_file {self.password_file}"] if self.password_file else []),
            f"persistence {'true' if self.persistence else 'false'}",
            f"persistence_location {self.workdir}/",
            "autosave_interval 1",
            "max_queued_messages 100000",
            "set_tcp_nodelay true",
            f"log_dest file {self.log_path}",
            "log_type error",
            "log_type warning",
            "log_type notice",
        ]
        if os.geteuid() == 0:
            lines.append("user root")  # else mosquitto drops to a user that cannot write here
        self.conf_path.write_text("\n".join(lines) + "\n" + self.extra_conf)

    def start(self, timeout_s: float = 10.0) -> None:
        self._write_conf()
        self._proc = subprocess.Popen(
            [mosquitto_binary(), "-c", str(self.conf_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if not wait_port(self.port, up=True, timeout_s=timeout_s):
            self.kill()
            raise RuntimeError(f"mosquitto did not listen on {self.port}; see {self.log_path}")

    def _signal(self, sig: signal.Signals) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop(self) -> None:
        """Graceful stop: Mosquitto saves its persistence file first."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def freeze(self, frozen: bool = True) -> None:
        """SIGSTOP (a broker that hangs: its sockets stay open, nothing is answered) or, with
        `frozen=False`, SIGCONT."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGSTOP if frozen else signal.SIGCONT)

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None
