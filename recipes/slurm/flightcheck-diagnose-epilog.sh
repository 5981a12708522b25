#!/usr/bin/env bash
# Slurm Epilog: when a job fails, name the root cause from its output file.
#
#   slurm.conf:  Epilog=/etc/slurm/flightcheck-diagnose-epilog.sh
#
# For a job that ended with a non-zero exit code, reads the job's StdOut file (from
# `scontrol show job`), runs `flightcheck diagnose --format json` on it and logs one line:
#   flightcheck: job 1234 on gpu07: FC101 nvcc-missing at line 1834 (profile, 14m 3s after the start)
# and writes the whole diagnosis next to the output file (<output>.diagnosis.json) when that
# directory is writable. It never changes the node's state and always exits 0 (an Epilog
# that fails drains the node). diagnose's exit: 0 no failure, 1 a known cause, 3 an unknown
# one (the likely root line is logged), 2 unreadable output.
#
# /etc/default/flightcheck (optional, sourced) may set FLIGHTCHECK, FLIGHTCHECK_TIMEOUT
# (default 50 s: Slurm's EpilogMsgTime budget), SCONTROL, FLIGHTCHECK_SLURM_LOG.
set -u

[ -r /etc/default/flightcheck ] && . /etc/default/flightcheck

FLIGHTCHECK="${FLIGHTCHECK:-flightcheck}"
SCONTROL="${SCONTROL:-scontrol}"
TIMEOUT="${FLIGHTCHECK_TIMEOUT:-50}"
NODE="${SLURMD_NODENAME:-$(hostname -s)}"
JOB="${SLURM_JOB_ID:-}"

log() {
    if [ -n "${FLIGHTCHECK_SLURM_LOG:-}" ]; then
        printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >>"$FLIGHTCHECK_SLURM_LOG"
    else
        logger -t flightcheck-slurm -- "$*" 2>/dev/null || printf '%s\n' "$*" >&2
    fi
}

[ -n "$JOB" ] || exit 0
# SLURM_JOB_EXIT_CODE2 is "exit:signal"; a job that succeeded needs nothing
case "${SLURM_JOB_EXIT_CODE2:-${SLURM_JOB_EXIT_CODE:-0}}" in 0 | 0:0) exit 0 ;; esac

out_file="$(timeout 5 "$SCONTROL" show job "$JOB" 2>/dev/null | tr ' ' '\n' | sed -n 's/^StdOut=//p' | head -n 1)"
[ -n "$out_file" ] && [ -r "$out_file" ] || exit 0

json="$(timeout -k 5 "$TIMEOUT" "$FLIGHTCHECK" diagnose --format json "$out_file" 2>/dev/null)"
rc=$?
case "$rc" in
    0) exit 0 ;;
    1 | 3) ;;
    *) log "flightcheck: job $JOB on $NODE: could not diagnose $out_file (exit $rc)"; exit 0 ;;
esac
summary="$(printf '%s' "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d["root"] or {}
c = d["causes"][0] if d["causes"] else None
where = ", ".join(x for x in (r.get("phase"), f"{r["elapsed_s"]:.0f} s after the start" if r.get("elapsed_s") is not None else None) if x)
head = f"{c["code"]} {c["name"]}" if c else "no known cause, likely root"
print(f"{head} at line {r.get("line_number")} ({where or "phase unknown"}): {r.get("line", "")[:200]}")
' 2>/dev/null)"
log "flightcheck: job $JOB on $NODE: ${summary:-diagnosis unreadable}"
dir="$(dirname "$out_file")"
if [ -w "$dir" ] && [ ! -L "$out_file.diagnosis.json" ]; then
    printf '%s\n' "$json" >"$out_file.diagnosis.json" 2>/dev/null || true
fi
exit 0
