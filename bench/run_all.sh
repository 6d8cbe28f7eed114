#!/usr/bin/env bash
# Every benchmark table in one go (a few minutes on 2 cores). Run from anywhere after
# `./bootstrap.sh test` (it makes .venv); installs the bench extra first. The fleet runs for one
# minute here; `python -m bench.fleet` alone runs the full five.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "run ./bootstrap.sh test first (it makes .venv)" >&2; exit 2; }
.venv/bin/pip install -q -e '.[bench]'
# the runtime as a robot installs it (no dev or demo extras), for its footprint
[ -x .venv-runtime/bin/python ] || python3 -m venv .venv-runtime
.venv-runtime/bin/pip install -q --force-reinstall --no-deps . && .venv-runtime/bin/pip install -q .
started=$(date +%s)
for bench in snapshot replay runtime taskmanager peers; do
    echo "=== bench.$bench"
    if [ "$bench" = runtime ]; then
        "$PY" -m bench.runtime --python .venv-runtime/bin/python
    else
        "$PY" -m "bench.$bench"
    fi
    echo
done
echo "=== bench.fleet (50 runtimes, 60 s; python -m bench.fleet for five minutes)"
"$PY" -m bench.fleet --robots 50 --seconds 60
echo
echo "all tables in $(( $(date +%s) - started )) s"
