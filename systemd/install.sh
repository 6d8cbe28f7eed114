#!/bin/sh
# Install or upgrade a2a-edge as a systemd service: the README's "Install as a service" steps,
# idempotent (run it again to upgrade; your /etc/a2a-edge/config.toml is never overwritten).
#
#   sudo systemd/install.sh [--wheel FILE] [--no-start]
#
#   --wheel FILE  install this wheel (default: the source tree this script is in)
#   --no-start    do not enable/start (or restart) the service (the README's first install:
#                 edit the config, then `systemctl enable --now a2a-edge`). A first install
#                 never starts the service with the example config it just put in place.
#
# Environment:
#   DESTDIR   stage everything under this root instead of / (packaging, tests); then no user
#             is created on this machine, nothing is started, and the venv's scripts name the
#             staged path (a staged venv is for inspection, not to be copied)
#   PREFIX    where the venv lives (default /opt/a2a-edge; the unit's ExecStart follows it)
#   PYTHON    the interpreter for the venv (default python3; 3.11 or newer)
#   PIP_ARGS  extra arguments for pip install (e.g. --no-deps, --no-index --find-links DIR)
#   PIP       a pip to install with, as a command (e.g. "python3 -m pip", 22.3 or newer): the
#             venv is then made without its own pip (default: the venv's own pip)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
wheel=""
start=1
while [ $# -gt 0 ]; do
    case "$1" in
        --wheel) wheel=$2; shift 2 ;;
        --no-start) start=0; shift ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/opt/a2a-edge}
PYTHON=${PYTHON:-python3}
PIP_ARGS=${PIP_ARGS:-}
root=${DESTDIR%/}
is_root() { [ "$(id -u)" = 0 ]; }
say() { echo "install.sh: $*"; }

# the ids of the service's user and group in the target root (its own /etc when staged)
ids() {
    uid=$(awk -F: '$1 == "a2a-edge" {print $3}' "$root/etc/passwd" 2>/dev/null || true)
    gid=$(awk -F: '$1 == "a2a-edge" {print $3}' "$root/etc/group" 2>/dev/null || true)
    [ -n "$uid" ] && [ -n "$gid" ] || { echo "install.sh: no user a2a-edge in $root/etc" >&2; exit 1; }
}

# 1. the system user and group (sysusers.d)
install -d -m 0755 "$root/usr/lib/sysusers.d" "$root/usr/lib/tmpfiles.d" "$root/etc"
install -m 0644 "$here/a2a-edge.sysusers" "$root/usr/lib/sysusers.d/a2a-edge.conf"
if command -v systemd-sysusers >/dev/null; then
    if [ -n "$root" ]; then
        systemd-sysusers --root="$root" "$root/usr/lib/sysusers.d/a2a-edge.conf"
    else
        systemd-sysusers /usr/lib/sysusers.d/a2a-edge.conf
    fi
elif [ -z "$root" ] && ! id a2a-edge >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/a2a-edge --shell /usr/sbin/nologin a2a-edge
elif [ -n "$root" ]; then
    echo "install.sh: DESTDIR needs systemd-sysusers (apt-get install systemd)" >&2
    exit 1
fi
ids

# 2. the package, in its own venv (created once; upgraded in place on every run)
venv="$root$PREFIX/.venv"
if [ -n "${PIP:-}" ]; then
    [ -x "$venv/bin/python" ] || "$PYTHON" -m venv --without-pip "$venv"
    pip="$PIP --python $venv/bin/python"
else
    [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
    pip="$venv/bin/python -m pip"
fi
# shellcheck disable=SC2086  # pip and PIP_ARGS are lists of arguments
$pip install -q --disable-pip-version-check --upgrade $PIP_ARGS "${wheel:-$src}"
install -m 0644 "$src/README.md" "$root$PREFIX/README.md"

# 3. config (kept when present) and the directories (tmpfiles.d)
install -m 0644 "$here/a2a-edge.tmpfiles" "$root/usr/lib/tmpfiles.d/a2a-edge.conf"
if is_root && command -v systemd-tmpfiles >/dev/null; then
    if [ -n "$root" ]; then
        systemd-tmpfiles --create --root="$root" "$root/usr/lib/tmpfiles.d/a2a-edge.conf"
    else
        systemd-tmpfiles --create /usr/lib/tmpfiles.d/a2a-edge.conf
    fi
else  # the same directories, without owners when we are not root
    install -d -m 0750 "$root/etc/a2a-edge"
    install -d -m 0700 "$root/var/lib/a2a-edge" "$root/var/lib/a2a-edge/backups"
fi
conf="$root/etc/a2a-edge"
owner=""
is_root && owner="-o 0 -g $gid"
# shellcheck disable=SC2086  # owner is two options or none
install -m 0640 $owner "$here/config.example.toml" "$conf/config.example.toml"
if [ ! -e "$conf/config.toml" ]; then
    # shellcheck disable=SC2086
    install -m 0640 $owner "$here/config.example.toml" "$conf/config.toml"
    [ "$start" = 1 ] && say "not starting the service with the example config"
    start=0  # the robot's device_id, its broker and its cloud are not known yet
    say "installed $conf/config.toml: edit it, then: sudo systemctl enable --now a2a-edge"
else
    say "kept $conf/config.toml (new keys and defaults: $conf/config.example.toml)"
fi

# 4. the unit
install -d -m 0755 "$root/etc/systemd/system"
sed "s|/opt/a2a-edge|$PREFIX|g" "$here/a2a-edge.service" >"$root/etc/systemd/system/.a2a-edge.tmp"
chmod 0644 "$root/etc/systemd/system/.a2a-edge.tmp"
mv "$root/etc/systemd/system/.a2a-edge.tmp" "$root/etc/systemd/system/a2a-edge.service"

# 5. systemd: only on this machine's own root, and only when systemd runs it
if [ -z "$root" ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    if [ "$start" = 1 ]; then
        if systemctl is-active --quiet a2a-edge; then
            systemctl restart a2a-edge  # an upgrade: the new code (migrations run at start)
        else
            systemctl enable --now a2a-edge
        fi
        systemctl --no-pager status a2a-edge | head -n 3 || true
    fi
fi
say "a2a-edge $("$venv/bin/python" -c 'import edge; print(edge.__version__)') in $root$PREFIX"
