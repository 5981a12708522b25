#!/usr/bin/env bash
# Build (or reuse) the venv the conformance tests read the REAL engines from.
#
#   scripts/conformance_env.sh [VENV_DIR]        (default: <repo>/.conformance-venv)
#
# Installs vllm==0.33.0 with all its dependencies (its own pins: torch==2.14.0 from PyPI,
# CUDA build; runs on a CPU-only host with VLLM_TARGET_DEVICE=cpu), then sglang==0.5.23
# with --no-deps: the two cannot share one resolution (sglang pins torch==2.14.1,
# transformers==5.19.0, flashinfer_python==0.7.2, xgrammar==0.2.7, numba==0.65.1,
# compressed-tensors==0.18.0; vllm pins torch==2.14.0, transformers<5.21,>=5.16.1,
# flashinfer-python==0.7.2.post1, xgrammar==0.2.8, numba==0.65.0, compressed-tensors==0.17.0),
# plus the one module sglang.srt.server_args / sglang.cli.serve import that vllm's
# dependencies do not bring (IPython, imported by sglang/utils.py).
#
# The engines' own pins decide: PIP_CONSTRAINT=/dev/null replaces a machine-wide pip
# constraint file for the installs into this venv only (an empty PIP_CONSTRAINT does not
# override pip.conf). Nothing outside the venv is changed.
#
# Idempotent: a venv whose stamp names the same versions and whose engines import is
# reused as it is. Prints the install time and the venv's size. Needs Python >= 3.11
# (sglang 0.5.23: Requires-Python >=3.11); PYTHON=... chooses the interpreter.
#
# Disk: the venv is 9.7 GiB (torch's CUDA libraries alone 3.5 GiB: torch cannot be imported
# without them, and vLLM's parser imports torch). With pip's cache off the install peaked at
# 11.4 GiB (df sampled every 2 s over two fresh installs); with it on, pip also keeps every
# wheel in ~/.cache/pip, 4.0 GiB more (`pip download vllm==0.33.0`). So pip's cache is off,
# its temporary files go beside the venv (not to /tmp, which may be small), and the free
# space is checked first. Too little disk is told apart from every other failure:
# exit 75 (EX_TEMPFAIL) with one line saying how much is free and how much is needed, and
# the partial venv removed, so that a caller (.ci/run) can run the rest of the tests; any
# other failure exits 1.
set -euo pipefail

VLLM_VERSION=0.33.0
SGLANG_VERSION=0.5.23
SGLANG_EXTRA=(ipython)
STAMP_TEXT="vllm==$VLLM_VERSION sglang==$SGLANG_VERSION extra=${SGLANG_EXTRA[*]}"

repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$repo/.conformance-venv}"
case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac
stamp="$venv/.flightcheck-conformance"
reader="$repo/src/flightcheck/_collect/engine_reader.py"

if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    command -v python3.11 >/dev/null 2>&1 && PYTHON=python3.11
fi

# Peak disk use of a fresh install, measured (see above), rounded up; the environment
# variable is for testing the too-little-disk path.
NEED_GIB=${FLIGHTCHECK_CONFORMANCE_NEED_GIB:-12}
EX_NO_DISK=75

export PIP_CONSTRAINT=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
size() { du -sh "$venv" 2>/dev/null | cut -f1; }
free_gib() {  # free GiB on the filesystem that holds $1 (or its nearest existing parent)
    local d="$1"
    while [ ! -e "$d" ]; do d="$(dirname "$d")"; done
    df -Pk "$d" | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'
}
no_disk() {  # the partial venv removed, then the one line (with what is free after that), exit 75
    rm -rf "$venv" "${tmp:-}"
    echo "conformance venv: not built: $1; $(free_gib "$venv") GiB free where $venv would be," \
        "a fresh install needs about $NEED_GIB GiB (the venv is ~10 GB)" >&2
    exit $EX_NO_DISK
}
pip_in() {  # pip in the venv, its output on stderr less the machine's index-location noise; ENOSPC told apart
    local out rc=0
    out=$("$venv/bin/python" -m pip "$@" 2>&1) || rc=$?
    printf '%s\n' "$out" | grep -v "^WARNING: Location '.*' is ignored" | grep -v '^$' >&2 || true
    if [ $rc -ne 0 ]; then
        if printf '%s' "$out" | grep -q 'No space left on device'; then
            no_disk "pip ran out of disk ($*)"
        fi
        return $rc
    fi
}

spec_for() {  # what the engine-agnostic reader child is told about engine $1 (engines.reader_spec)
    PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}" python3 -c \
        'import json, sys; from flightcheck._knowledge import engines; print(json.dumps(engines.reader_spec(sys.argv[1])))' "$1"
}

smoke() {  # both engines' parsers, through the reader the tests use
    local rc=0 out spec
    for line in "vllm|-- vllm serve M -tp 2" "sglang|-- sglang serve --model-path M --tp 2"; do
        spec=$(spec_for "${line%%|*}") || { echo "smoke check: no reader spec for ${line%%|*}" >&2; return 1; }
        out=$(VLLM_TARGET_DEVICE=cpu "$venv/bin/python" "$reader" --spec "$spec" --timeout 300 ${line#*|} 2>/dev/null) || rc=1
        if ! printf '%s' "$out" | "$venv/bin/python" -c \
            'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d.get("error") is None and d.get("tensor_parallel_size")==2 else 1)'; then
            echo "smoke check failed for ${line%%|*}: $out" >&2
            rc=1
        fi
    done
    return $rc
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$STAMP_TEXT" ] && [ -x "$venv/bin/python" ] \
    && "$venv/bin/python" -c 'import vllm, sglang.srt.server_args' >/dev/null 2>&1; then
    echo "conformance venv: reusing $venv ($STAMP_TEXT), size $(size)"
    exit 0
fi

start=$SECONDS
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed (sglang 0.5.23)")'
# pip's temporary files (the downloaded wheels) beside the venv, on the same filesystem.
tmp="$venv.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
export TMPDIR="$tmp"
have=$(du -sk "$venv" 2>/dev/null | cut -f1 || echo 0)
# What is already in a venv being completed counts towards the need.
if awk -v f="$(free_gib "$venv")" -v h="${have:-0}" -v n="$NEED_GIB" 'BEGIN { exit !(f + h / 1048576 < n) }'; then
    no_disk "too little disk before the install"
fi
if [ ! -x "$venv/bin/python" ]; then
    echo "conformance venv: creating $venv with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$venv"
fi
rm -f "$stamp"
pip_in install -q --upgrade pip
echo "conformance venv: installing vllm==$VLLM_VERSION and its dependencies"
pip_in install -q "vllm==$VLLM_VERSION"
echo "conformance venv: installing sglang==$SGLANG_VERSION --no-deps (+ ${SGLANG_EXTRA[*]})"
pip_in install -q "${SGLANG_EXTRA[@]}"  # first: pip's post-install check would list sglang's pins
pip_in install -q --no-deps "sglang==$SGLANG_VERSION"
# sglang's unmet pins are expected (see above): show them, do not fail on them.
unmet=$("$venv/bin/python" -m pip check 2>/dev/null | grep -i '^sglang' || true)
if [ -n "$unmet" ]; then
    printf 'conformance venv: sglang pins left unmet on purpose: %s not installed; other versions of: %s\n' \
        "$(printf '%s\n' "$unmet" | grep -c 'which is not installed')" \
        "$(printf '%s\n' "$unmet" | sed -n 's/.*has requirement \([^=<>!~ ]*\).*/\1/p' | tr '\n' ' ')"
fi

if ! smoke; then
    echo "conformance venv: the engines' parsers do not work in $venv" >&2
    exit 1
fi
echo "$STAMP_TEXT" > "$stamp"
elapsed=$((SECONDS - start))
printf 'conformance venv: ready at %s in %dm%02ds, size %s\n' "$venv" $((elapsed / 60)) $((elapsed % 60)) "$(size)"
