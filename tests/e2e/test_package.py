"""The package as an operator installs it: a wheel with the catalogs inside, installed by
systemd/install.sh into a temporary root (DESTDIR), idempotently, and run from there.

The wheel is built without build isolation (setuptools from the dev venv) and installed into a
venv that has nothing else: its dependencies come from the package index as the wheel's
metadata names them (pip's own cache keeps this quick), so an undeclared one fails the run."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.e2e.background import Background

REPO = Path(__file__).parents[2]
SETUPTOOLS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
PACKAGES = sorted({p.split(".")[0] for p in SETUPTOOLS["packages"]})  # edge.cli: with edge
INSTALL = REPO / "systemd" / "install.sh"
pytestmark = pytest.mark.e2e


def run(args: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=120, **kwargs
    )  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the sources (a build in the checkout would leave build/ there)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for package in PACKAGES:
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    built = run([*pip_wheel, "-w", work / "dist", src])
    if built.returncode != 0:
        pytest.skip(
            f"no wheel without network (setuptools>=77 is a dev extra): {built.stderr[-300:]}"
        )
    (found,) = (work / "dist").glob("a2a_edge-*.whl")
    return found


def test_the_wheel_holds_the_catalogs_and_the_entry_point(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    page = [f"edge/console/static/console.{ext}" for ext in ("html", "js", "css")]
    for data in ("taskmanager/catalog.json", "edge/py.typed", "a2a_common/py.typed", *page):
        assert data in names, data
    assert not [n for n in names if n.startswith("tests/")]
    meta = {n.split("/")[-1]: n for n in names if ".dist-info/" in n}
    text = zipfile.ZipFile(wheel).read(meta["entry_points.txt"]).decode()
    assert "a2a-edge = edge.cli:main" in text
    requires = zipfile.ZipFile(wheel).read(meta["METADATA"]).decode()
    assert "Requires-Dist: prometheus-client" in requires


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


def ids_of(root: Path, name: str) -> tuple[int, int]:
    """The user's uid and the group's gid in the staged root's own /etc."""
    uid = next(
        line
        for line in (root / "etc/passwd").read_text().splitlines()
        if line.startswith(name + ":")
    )
    gid = next(
        line
        for line in (root / "etc/group").read_text().splitlines()
        if line.startswith(name + ":")
    )
    return int(uid.split(":")[2]), int(gid.split(":")[2])


def install(root: Path, wheel: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DESTDIR": str(root),
        "PIP_ARGS": "",  # the dependencies the wheel declares, from the index, and nothing else
        "PYTHON": sys.executable,
        "PIP": f"{sys.executable} -m pip",  # a venv without its own pip: 0.3 s, not 8
    }
    return run(["sh", INSTALL, "--wheel", wheel, "--no-start"], env=env)


@pytest.mark.skipif(not shutil.which("systemd-sysusers"), reason="needs systemd-sysusers")
def test_install_sh_into_a_temporary_root_then_run_from_it(wheel: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    first = install(root, wheel)
    assert first.returncode == 0, first.stderr
    assert "installed " in first.stdout and "a2a-edge 0.1.0 in " in first.stdout
    etc, state, venv = root / "etc/a2a-edge", root / "var/lib/a2a-edge", root / "opt/a2a-edge/.venv"
    assert mode(etc) == "0o750" and mode(etc / "config.toml") == "0o640"
    assert mode(state) == "0o700" and mode(state / "backups") == "0o700"
    unit = root / "etc/systemd/system/a2a-edge.service"
    assert (
        mode(unit) == "0o644"
        and "ExecStart=/opt/a2a-edge/.venv/bin/a2a-edge run" in unit.read_text()
    )
    assert (root / "usr/lib/sysusers.d/a2a-edge.conf").is_file()
    assert (root / "usr/lib/tmpfiles.d/a2a-edge.conf").is_file()
    assert (root / "opt/a2a-edge/README.md").is_file()
    if os.geteuid() == 0:  # owners can only be set by root
        uid, gid = ids_of(root, "a2a-edge")
        assert (etc.stat().st_uid, etc.stat().st_gid) == (0, gid)
        assert ((etc / "config.toml").stat().st_uid, (etc / "config.toml").stat().st_gid) == (
            0,
            gid,
        )
        assert (state.stat().st_uid, state.stat().st_gid) == (uid, gid)

    (etc / "config.toml").write_text('device_id = "robot-042"\n')  # the operator's edit
    again = install(root, wheel)
    assert again.returncode == 0, again.stderr
    assert "kept " in again.stdout
    assert (etc / "config.toml").read_text() == 'device_id = "robot-042"\n'
    users = (root / "etc/passwd").read_text().splitlines()
    assert [line.split(":")[0] for line in users].count("a2a-edge") == 1
    assert mode(etc / "config.toml") == "0o640"

    # only what the wheel declared is there (no dev venv behind it); run from elsewhere
    alone = run([venv / "bin/python", "-c", "import pytest"], cwd=tmp_path)
    assert alone.returncode != 0, "the venv sees a package the wheel does not declare"
    with Background([venv / "bin/a2a-edge", "demo", "--json"], tmp_path, tmp_path) as demo:
        # the demo (~22 s, mostly waiting) plays while the quick checks run
        where = run(
            [venv / "bin/python", "-c", "import edge, taskmanager; print(edge.__file__)"],
            cwd=tmp_path,
        )
        assert where.stdout.startswith(str(venv)), where
        checked = run([sys.executable, "-m", "pip", "--python", venv / "bin/python", "check"])
        assert checked.returncode == 0, checked.stdout  # every Requires-Dist of the wheel is met
        helped = run([venv / "bin/a2a-edge", "--help"], cwd=tmp_path)
        assert helped.returncode == 0 and "demo" in helped.stdout
        if "--version" in helped.stdout:
            version = run([venv / "bin/a2a-edge", "--version"], cwd=tmp_path)
            assert version.returncode == 0 and "0.1.0" in version.stdout + version.stderr
        played = demo.done()
    assert played.returncode == 0, played.stderr[-2000:]
    assert '"WORKFLOW_COMPLETED"' in played.stdout
