#!/usr/bin/env bash
# The full reliability run: 200 SIGKILLs, 20 broker restarts, the cloud fault cases, 100,000
# fuzzed payloads, 4,000-turn bursts against the WAL bound; prints one table. Run from the
# project root after ./bootstrap.sh test.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
export A2A_TORTURE_KILLS=${A2A_TORTURE_KILLS:-200}
export A2A_BROKER_RESTARTS=${A2A_BROKER_RESTARTS:-20}
export A2A_FUZZ_PAYLOADS=${A2A_FUZZ_PAYLOADS:-100000}
export A2A_WAL_TURNS=${A2A_WAL_TURNS:-4000}
export A2A_SHUTDOWN_ROUNDS=${A2A_SHUTDOWN_ROUNDS:-6}
export A2A_HUGE_BODY_MB=${A2A_HUGE_BODY_MB:-400}
export A2A_METRICS_CLIENTS=${A2A_METRICS_CLIENTS:-1100}
export A2A_METRICS_ATTACK_S=${A2A_METRICS_ATTACK_S:-30}
export A2A_METRICS_NOFILE=${A2A_METRICS_NOFILE:-1024}
export A2A_HYPOTHESIS_PROFILE=${A2A_HYPOTHESIS_PROFILE:-ci-deep}
.venv/bin/pytest -q -s -p no:cacheprovider tests/reliability/test_torture.py >"$out/torture" 2>&1
torture_rc=$?
.venv/bin/pytest -q -p no:cacheprovider tests/reliability/test_broker_faults.py >"$out/broker" 2>&1
broker_rc=$?
.venv/bin/pytest -q -p no:cacheprovider tests/reliability/test_cloud_faults.py >"$out/cloud" 2>&1
cloud_rc=$?
.venv/bin/pytest -q -s -p no:cacheprovider tests/reliability/test_fuzz.py >"$out/fuzz" 2>&1
fuzz_rc=$?
.venv/bin/pytest -q -s -p no:cacheprovider tests/reliability/test_wal.py >"$out/wal" 2>&1
wal_rc=$?
.venv/bin/pytest -q -p no:cacheprovider tests/reliability/test_shutdown.py \
    tests/reliability/test_cloud_peer.py tests/reliability/test_metrics_port.py \
    tests/reliability/test_deaf.py tests/reliability/test_fields.py >"$out/peers" 2>&1
peers_rc=$?
.venv/bin/python - "$out" "$torture_rc" "$broker_rc" "$cloud_rc" "$fuzz_rc" "$wal_rc" "$peers_rc" <<'PY'
import re, sys
out, t_rc, b_rc, c_rc, f_rc, w_rc, p_rc = sys.argv[1], *map(int, sys.argv[2:])
read = lambda name: open(f"{out}/{name}", encoding="utf-8", errors="replace").read()
fig = dict(re.findall(r"(\w+)=(\d+)", (re.search(r"Figures\((.*?)\)", read("torture")) or
                                       re.search("()", "")).group(1)))
cloud = re.search(r"(\d+) passed", read("cloud"))
fuzz = re.search(r"fuzzed (\d+) payloads; RSS (\d+) kB -> \+(-?\d+) kB", read("fuzz"))
wal = re.search(r"burst of (\d+) turns in \S+: largest (\S+ MB) \(bound (\d+ MB)", read("wal"))
rows = [
    ("kills survived", fig.get("kills", "0") if t_rc == 0 else f"FAILED ({fig.get('kills', 0)})"),
    ("broker restarts survived", __import__("os").environ["A2A_BROKER_RESTARTS"]
     if b_rc == 0 else "FAILED"),
    ("cloud fault cases passed", cloud.group(1) if cloud else "0"),
    ("payloads fuzzed", fuzz.group(1) if fuzz else "FAILED"),
    ("RSS before / growth (kB)", f"{fuzz.group(2)} / +{fuzz.group(3)}" if fuzz else "-"),
    ("crashes", "0" if f_rc == 0 and t_rc == 0 else "see logs"),
    ("lost writes", fig.get("lost_writes", "?")),
    ("duplicate applications", fig.get("duplicate_applications", "?")),
    ("stuck workflows", fig.get("stuck_workflows", "?")),
    ("turns without exactly one pair", fig.get("turns_without_pair", "?")),
    ("integrity_check failures", fig.get("integrity_failures", "?")),
    ("largest WAL in a turn burst", f"{wal.group(2)} of {wal.group(3)} ({wal.group(1)} turns)"
     + ("" if w_rc == 0 else " FAILED") if wal else "FAILED"),
    ("commands re-delivered (deduped)", fig.get("resent_commands", "?")),
    ("shutdown / hostile peers / never deaf",
     (re.search(r"(\d+) passed", read("peers")) or re.search("()", "")).group(1) + " passed"
     + ("" if p_rc == 0 else " FAILED")),
]
width = max(len(r[0]) for r in rows)
print(f"{'reliability (full run)':<{width}}  value")
for name, value in rows:
    print(f"{name:<{width}}  {value}")
print(f"(logs in {out})")
sys.exit(0 if not any((t_rc, b_rc, c_rc, f_rc, w_rc, p_rc)) else 1)
PY
