"""The first install (issue 35 item 7): the service is never started with the example config
install.sh has just put in place, and the README's steps install with `--no-start`, edit the
config, then start it. install.sh runs for real into a temporary root (DESTDIR), as
tests/e2e/test_package.py runs it."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.e2e.test_package import INSTALL, REPO, run, wheel  # noqa: F401  (a fixture)

pytestmark = pytest.mark.e2e


def installed(root: Path, built: Path, *extra: str) -> str:
    env = {
        **os.environ,
        "DESTDIR": str(root),
        "PIP_ARGS": "--no-deps",
        "PYTHON": sys.executable,
        "PIP": f"{sys.executable} -m pip",
    }
    done = run(["sh", INSTALL, "--wheel", built, *extra], env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not shutil.which("systemd-sysusers"), reason="needs systemd-sysusers")
def test_a_first_install_does_not_start_with_the_example_config(
    wheel: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    first = installed(tmp_path / "root", wheel)  # no --no-start: the script decides
    assert "not starting the service with the example config" in first, first
    assert "edit it, then: sudo systemctl enable --now a2a-edge" in first, first
    again = installed(tmp_path / "root", wheel)  # an upgrade: the operator's config is kept
    assert "kept " in again and "not starting" not in again, again
    quiet = installed(tmp_path / "other", wheel, "--no-start")  # asked for: nothing to say
    assert "not starting" not in quiet and "enable --now a2a-edge" in quiet, quiet


def test_the_readme_installs_with_no_start_then_edits_then_starts() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Install as a service") :]
    block = section[section.index("```sh") : section.index("```", section.index("```sh") + 5)]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    install = next(i for i, line in enumerate(lines) if "systemd/install.sh" in line)
    edit = next(i for i, line in enumerate(lines) if line.startswith("sudoedit "))
    start = next(i for i, line in enumerate(lines) if "systemctl enable --now a2a-edge" in line)
    assert "--no-start" in lines[install].split(), lines[install]
    assert install < edit < start, block
    before = " ".join(lines[:edit])
    assert not re.search(r"systemctl (start|restart|enable)", before), before
