#!/usr/bin/env bash
# Every benchmark table in one go (about a quarter of an hour on 2 cores), then ONE summary
# table of issue 23's figures beside their goals and peers (bench/summary.py, from the JSON
# each bench leaves in $BENCH_OUT). Run from anywhere after `./bootstrap.sh test` (it makes
# .venv); installs the bench extra first. The fleet runs 100 runtimes for one minute here;
# `python -m bench.fleet` alone runs 50 for the full five.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "run ./bootstrap.sh test first (it makes .venv)" >&2; exit 2; }
.venv/bin/pip install -q -e '.[bench]'
# the runtime as a robot installs it (no dev or demo extras), for its footprint
[ -x .venv-runtime/bin/python ] || python3 -m venv .venv-runtime
.venv-runtime/bin/pip install -q --force-reinstall --no-deps . && .venv-runtime/bin/pip install -q .
export BENCH_OUT="${BENCH_OUT:-$(mktemp -d -t a2a-bench.XXXXXX)}"
mkdir -p "$BENCH_OUT" && rm -f "$BENCH_OUT"/*.json  # no figure of an earlier run in the table
benches="snapshot replay runtime taskmanager cancel loaded"
[ -f bench/disk.py ] && benches="$benches disk"
benches="$benches peers floor statements"
failed=""  # a bench that fails is named at the end; the others still run and are summarised
started=$(date +%s)
for bench in $benches; do
    echo "=== bench.$bench"
    if [ "$bench" = runtime ]; then
        "$PY" -m bench.runtime --python .venv-runtime/bin/python || failed="$failed $bench"
    else
        "$PY" -m "bench.$bench" || failed="$failed $bench"
    fi
    echo
done
echo "=== bench.fleet (100 runtimes, 60 s; python -m bench.fleet for 50 over five minutes)"
"$PY" -m bench.fleet --robots 100 --seconds 60 || failed="$failed fleet"
echo
echo "all tables in $(( $(date +%s) - started )) s; figures in $BENCH_OUT"
echo
"$PY" -m bench.summary --dir "$BENCH_OUT"
if [ -n "$failed" ]; then
    echo "failed:$failed" >&2
    exit 1
fi
