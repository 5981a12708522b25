#!/usr/bin/env bash
# Record what flightcheck sees on a real GPU node, for tests/fixtures and bug reports.
#
#   scripts/device_check.sh [OUTDIR]      (default: $OUT, else ./device-check-out)
#
# Runs, each with its own time limit:
#   flightcheck collect                        -> collect.json   (facts snapshot, secrets never included)
#   flightcheck probe multicast --format json  -> probe.json     (the NVLS bind probe, in a child)
#   flightcheck check --deep -tp N --format json -> check.json   (N: the largest power of two <= GPUs)
#   nvidia-smi -q                              -> nvidia-smi.txt (the driver's own view, for comparison)
# then replaces this machine's host names everywhere with "redacted-host".
#
# Dependencies: flightcheck importable by python3, or its runtime dependencies in ./.devdeps
# (prepare them where the network is: `python3 -m pip install --target .devdeps msgspec packaging
# rich nvidia-ml-py pyyaml` for the node's Python version) — the script then runs from src/.
set -uo pipefail

cd "$(dirname "$0")/.."
out="${1:-${OUT:-device-check-out}}"
mkdir -p "$out"
py="${PYTHON:-python3}"
[ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ] && py=.venv/bin/python  # a PYTHON given wins
if ! "$py" -c "import flightcheck" 2>/dev/null; then
    export PYTHONPATH="$PWD/src:$PWD/.devdeps${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! "$py" -c "import flightcheck, msgspec, pynvml" 2>"$out/import-error.txt"; then
    echo "flightcheck or its dependencies are not importable: see $out/import-error.txt" >&2
    exit 2
fi
rm -f "$out/import-error.txt"

step() {  # step NAME TIMEOUT FILE CMD...: run, keep stdout, stderr and exit code
    local name=$1 limit=$2 file=$3
    shift 3
    local t0 rc ms
    t0=$(date +%s%N)
    timeout --kill-after=5 "$limit" "$@" >"$out/$file" 2>"$out/$name.stderr"
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    printf '%-10s exit %-3s %6d ms  %s\n' "$name" "$rc" "$ms" "$*" | tee -a "$out/steps.txt"
    [ -s "$out/$name.stderr" ] || rm -f "$out/$name.stderr"
}

: >"$out/steps.txt"
command -v nvidia-smi >/dev/null && step nvsmi 60 nvidia-smi.txt nvidia-smi -q
step collect 90 collect.json "$py" -m flightcheck collect
step probe 120 probe.json "$py" -m flightcheck probe multicast --format json --timeout 60
ngpu=$("$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d.get("gpus") or []))' "$out/collect.json" 2>/dev/null || echo 0)
tp=1
while [ $((tp * 2)) -le "${ngpu:-0}" ]; do tp=$((tp * 2)); done
step check 180 check.json "$py" -m flightcheck check --deep -tp "$tp" --format json

# Redact: every name this host answers to, in every file written above.
"$py" - "$out" "$(hostname 2>/dev/null)" "$(hostname -f 2>/dev/null)" "$(hostname -s 2>/dev/null)" <<'PY'
import json, pathlib, sys
out, names = pathlib.Path(sys.argv[1]), sorted({n for n in sys.argv[2:] if n and n != "localhost"}, key=len, reverse=True)
for f in out.iterdir():
    if not f.is_file():
        continue
    text = f.read_text(errors="replace")
    for n in names:
        text = text.replace(n, "redacted-host")
    if f.suffix == ".json":
        try:
            doc = json.loads(text)
            if isinstance(doc, dict) and isinstance(doc.get("host"), dict):
                doc["host"]["hostname"] = "redacted-host"
            elif isinstance(doc, dict) and "host" in doc:
                doc["host"] = "redacted-host"
            text = json.dumps(doc, indent=1) + "\n"
        except ValueError:
            pass
    f.write_text(text)
print(f"redacted {len(names)} host name(s) in {out}")
PY
echo "GPUs: $ngpu, checked with -tp $tp; results in $out"
