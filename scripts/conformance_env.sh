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

export PIP_CONSTRAINT=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
pip_in() { "$venv/bin/python" -m pip "$@"; }
size() { du -sh "$venv" 2>/dev/null | cut -f1; }

smoke() {  # both engines' parsers, through the reader the tests use
    local rc=0 out
    for line in "vllm|-- vllm serve M -tp 2" "sglang|-- sglang serve --model-path M --tp 2"; do
        out=$(VLLM_TARGET_DEVICE=cpu "$venv/bin/python" "$reader" "${line%%|*}" --timeout 300 ${line#*|} 2>/dev/null) || rc=1
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
unmet=$(pip_in check 2>/dev/null | grep -i '^sglang' || true)
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
