#!/usr/bin/env bash
# One entry point for a fresh Debian/Ubuntu machine with Python 3.11+:
#   ./bootstrap.sh demo   set up, then run `.venv/bin/a2a-edge demo` (extra arguments go to it)
#   ./bootstrap.sh test   set up, then ruff, mypy --strict, lint-imports and the whole pytest suite
# Set-up = a virtualenv in .venv with the package and its dev tools, and Mosquitto (installed
# with apt-get when missing and we are root; otherwise we stop and say what to install).
set -euo pipefail
cd "$(dirname "$0")"

die() { echo "bootstrap: $*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }
apt_install() {
    is_root || die "missing $*: install it with 'sudo apt-get install -y $*' and run again"
    command -v apt-get >/dev/null || die "missing $* and no apt-get here: install $* yourself"
    if [ -z "${APT_UPDATED:-}" ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

find_python() {
    for candidate in python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    die "Python 3.11 or newer is needed (apt-get install python3)"
}

ensure_mosquitto() {
    if command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ]; then return; fi
    echo "bootstrap: installing mosquitto" >&2
    apt_install mosquitto
}

ensure_test_tools() {
    # the unit-file test needs systemd's analyzer; the TLS tests make their CA with openssl
    command -v systemd-analyze >/dev/null || apt_install systemd
    command -v openssl >/dev/null || apt_install openssl
    # docs/device-agents.md's examples are run with mosquitto_pub/mosquitto_sub; without them
    # that one test is skipped, so their absence does not stop the set-up
    if ! command -v mosquitto_pub >/dev/null || ! command -v mosquitto_sub >/dev/null; then
        if is_root && command -v apt-get >/dev/null; then
            apt_install mosquitto-clients
        else
            echo "bootstrap: no mosquitto-clients: the device-agent guide's test will skip" >&2
        fi
    fi
    # tests/e2e/test_run_it_yourself.py runs the cloud team's Node.js planner (Node 18+);
    # without node that test is skipped
    if ! command -v node >/dev/null; then
        if is_root && command -v apt-get >/dev/null; then
            echo "bootstrap: installing nodejs (the cloud team's planner in the run-it-yourself test)" >&2
            (apt_install nodejs) ||
                echo "bootstrap: apt-get could not install nodejs: test_run_it_yourself will skip" >&2
        else
            echo "bootstrap: no node (Node.js 18+): tests/e2e/test_run_it_yourself.py will skip" >&2
        fi
    fi
    ensure_system_test_tools
}

ensure_system_test_tools() {
    # tests/system/ boots the unit under a real systemd in a container: root, debootstrap and
    # systemd-nspawn (systemd-container); its rootfs is cached in /var/cache/a2a-edge-test
    if command -v debootstrap >/dev/null && command -v systemd-nspawn >/dev/null && is_root; then
        return
    fi
    if is_root && command -v apt-get >/dev/null; then
        (apt_install debootstrap systemd-container) ||
            echo "bootstrap: apt-get could not install debootstrap systemd-container:" \
                "tests/system/ (the unit under systemd) will skip" >&2
    else
        echo "bootstrap: not root or no apt-get: tests/system/ (the unit under systemd) will skip" >&2
    fi
}

ensure_browser() {
    # tests/e2e/test_console_browser.py drives Debian's chromium through chromedriver; without
    # them (and not root to install them) those tests skip with one line saying so
    if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then return; fi
    if is_root && command -v apt-get >/dev/null; then
        echo "bootstrap: installing chromium and chromedriver (the console's browser tests)" >&2
        (apt_install chromium chromium-driver fonts-nanum) ||
            echo "bootstrap: apt-get could not install chromium: the browser tests will skip" >&2
    else
        echo "bootstrap: no chromium/chromedriver: the console's browser tests will skip" >&2
    fi
}

ensure_venv() {
    local py stamp want
    py=$(find_python)
    if [ ! -x .venv/bin/python ]; then
        if ! "$py" -m venv .venv 2>/dev/null; then
            rm -rf .venv
            apt_install "python3-venv"
            "$py" -m venv .venv || die "could not create a virtualenv with $py"
        fi
    fi
    want=$(sha256sum pyproject.toml | cut -d' ' -f1)
    stamp=.venv/.a2a-edge-installed
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        echo "bootstrap: installing a2a-edge and its dev tools into .venv" >&2
        .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
        if ! .venv/bin/python -m pip install -q -e '.[dev,demo]' >.venv/pip-install.log 2>&1; then
            grep -v "^WARNING: Location" .venv/pip-install.log | tail -n 20 >&2
            die "installing the package failed (full log: .venv/pip-install.log)"
        fi
        echo "$want" >"$stamp"
    fi
}

command="${1:-}"
case "$command" in
    demo)
        ensure_mosquitto
        ensure_venv
        status=0
        .venv/bin/a2a-edge demo "${@:2}" || status=$?
        # the README's next commands: a2a-edge is in .venv/bin, which is not on PATH
        echo "bootstrap: a2a-edge is installed in .venv/bin (not on your PATH): run" \
            "'.venv/bin/a2a-edge --help', or 'source .venv/bin/activate' first" >&2
        exit "$status"
        ;;
    test)
        ensure_mosquitto
        ensure_test_tools
        ensure_browser
        ensure_venv
        export PATH="$PWD/.venv/bin:$PATH:/usr/sbin"
        # every check runs (a CI log shows them all); any that fails makes the exit non-zero
        status=0
        lint() {
            local rc=0
            "$@" || rc=$?
            if [ "$rc" != 0 ]; then
                echo "bootstrap: '$*' failed (exit $rc)" >&2
                status=1
            fi
        }
        echo "== ruff" && lint ruff check . && lint ruff format --check .
        echo "== mypy --strict" && lint mypy
        echo "== lint-imports" && lint lint-imports
        if [ $# -gt 1 ]; then
            echo "== pytest"
            pytest -q "${@:2}" || status=$?
            exit "$status"
        fi
        # the systemd tests first, alone on the machine (beside a busy worker their unit's stop
        # failed: systemd "Failed to kill control group ...: Input/output error"), then the rest
        # on A2A_TEST_WORKERS workers (2); exit non-zero when either part (or a check) failed
        echo "== pytest (the service under systemd, alone)"
        pytest -q -m system tests/system || { rc=$?; [ "$rc" = 5 ] || status=$rc; }
        echo "== pytest"
        pytest -q -n "${A2A_TEST_WORKERS:-2}" --dist loadgroup -m "not system" || status=$?
        exit "$status"
        ;;
    *)
        echo "usage: ./bootstrap.sh demo | test [pytest args]" >&2
        exit 2
        ;;
esac
