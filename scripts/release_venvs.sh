#!/usr/bin/env bash
# Build (or reuse) small venvs holding OLDER engine releases, for the cross-release
# conformance tests (tests/conformance/test_releases.py): each release's own parser reads
# a corpus, and flightcheck's release reader (the release atlas) must read it the same.
#
#   scripts/release_venvs.sh [ROOT]   (default: $FLIGHTCHECK_RELEASE_VENVS, else
#                                      ~/.cache/flightcheck/release-venvs: kept between CI runs)
#
# The newest releases (vllm 0.33.0, sglang 0.5.23) are in the main conformance venv
# (scripts/conformance_env.sh). Here, one venv per release, ROOT/<engine>-<version>/:
#
#   * the engine's wheel with --no-deps, its compiled extensions (*.so, 300 MB-1 GB of CUDA
#     kernels) deleted: the parser never loads them (the engines import them in a
#     try/except, vllm/_custom_ops.py);
#   * the real pure-Python packages the parser's import chain needs, each found by importing
#     the parser until nothing was missing (pinned below: the releases' own pins where they
#     pin, else the newest that imports);
#   * one CPU torch shared by every venv (ROOT/_torch, `pip install --target`, reached
#     through a .pth): the engines' modules subclass torch.nn.Module at import, which no stub
#     survives; torch==2.13.0 CPU lies on this machine kind's disk (see
#     /work/.library/env/machines/python.md), elsewhere pip downloads it;
#   * scripts/release_stubs.py as a last-resort import finder for the GPU-only modules
#     listed per release (triton, ...): a permissive stub where no real module exists.
#
# Idempotent: a venv whose stamp (.flightcheck-release) names the same recipe and whose
# parser smoke test passes is reused. Prints the time and disk of each part. Too little disk
# exits 75 (EX_TEMPFAIL) with one line, the partial venvs removed, so that .ci/run runs the
# rest; any other failure exits 1. Needs Python 3.11 (the torch file is cp311).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
root="${1:-${FLIGHTCHECK_RELEASE_VENVS:-$HOME/.cache/flightcheck/release-venvs}}"
case "$root" in /*) ;; *) root="$PWD/$root" ;; esac
STUBS="$repo/scripts/release_stubs.py"
DRIVER="$repo/scripts/release_reader.py"
TORCH=(torch==2.13.0)
# Measured (2 shared CPUs, nice'd, pip cache off): a fresh build 279 s, 2.1 GiB in all
# (_torch 879 MB, vllm-0.6.0 412 MB, vllm-0.10.2 487 MB, sglang-0.4.0 337 MB); reuse 16 s.
# The need covers the peak: the vllm 0.10.2 wheel (436 MB) unpacks ~1 GB of *.so before they
# are deleted, its download beside it.
NEED_GIB=${FLIGHTCHECK_RELEASE_VENVS_NEED_GIB:-4}
EX_NO_DISK=75

if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    command -v python3.11 >/dev/null 2>&1 && PYTHON=python3.11
fi

# RELEASES: name | engine wheel | real packages | stubbed modules | extras
#   extras "vllm-cpu-platform": a vLLM platform plugin naming vLLM's own CpuPlatform
#   (vllm/platforms/__init__.py resolve_current_platform_cls_qualname, 0.10.2: without a GPU,
#   nvml or a "+cpu" build, no platform is detected and DeviceConfig() - built by
#   EngineArgs.add_cli_args for its defaults - raises "Failed to infer device type").
RELEASES=(
    "vllm-0.6.0|vllm==0.6.0|transformers==4.44.2 tokenizers==0.19.1 numpy==1.26.4 msgspec==0.23.0 psutil==7.2.2 pydantic==2.14.4 gguf==0.19.0 sentencepiece==0.2.3 mistral_common==1.13.1 py-cpuinfo==9.0.0 aiohttp==3.14.5 openai==3.57.0||"
    "vllm-0.10.2|vllm==0.10.2|transformers==4.56.1 numpy==2.2.6 msgspec==0.23.0 psutil==7.2.2 pydantic==2.14.4 gguf==0.19.0 sentencepiece==0.2.3 mistral_common==1.13.1 py-cpuinfo==9.0.0 aiohttp==3.14.5 openai==3.57.0 regex==2026.11.19 cachetools==8.0.2 blake3==1.0.11 cloudpickle==3.1.3 pyzmq==27.3.0 cbor2==6.3.0 setproctitle==1.3.8 pybase64==1.5.1 fastapi==0.165.0 openai-harmony==0.0.8 partial-json-parser==0.2.1.1.post7 uvloop==0.23.0 prometheus_client==0.26.0 prometheus-fastapi-instrumentator==8.1.0 uvicorn==0.54.0 watchfiles==1.3.0 python-multipart==0.0.34 diskcache==5.6.3||vllm-cpu-platform"
    "sglang-0.4.0|sglang==0.4.0|transformers==4.46.3 numpy==1.26.4 psutil==7.1.3 requests==2.34.2 pyzmq==27.3.0 fastapi==0.165.0 packaging==26.4 ipython==9.18.1|triton|"
)
ONLY="${FLIGHTCHECK_RELEASES:-}"  # e.g. "vllm-0.6.0 sglang-0.4.0": build only these

export PIP_CONSTRAINT=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
free_gib() {
    local d="$1"
    while [ ! -e "$d" ]; do d="$(dirname "$d")"; done
    df -Pk "$d" | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'
}
size() { du -sh "$1" 2>/dev/null | cut -f1; }
no_disk() {
    rm -rf "${partial:-}" "${tmp:-}"
    echo "release venvs: not built: $1; $(free_gib "$root") GiB free at $root, a fresh build needs about $NEED_GIB GiB" >&2
    exit $EX_NO_DISK
}
pip_run() {  # pip with the machine's index-location noise dropped; ENOSPC told apart
    local py="$1" out rc=0
    shift
    out=$("$py" -m pip "$@" 2>&1) || rc=$?
    printf '%s\n' "$out" | grep -v -e "^WARNING: Location '.*' is ignored" -e "which is not installed" \
        -e "^ERROR: pip's dependency resolver" -e "requires .*, but you have" -e "^$" >&2 || true
    if [ $rc -ne 0 ]; then
        printf '%s' "$out" | grep -q 'No space left on device' && no_disk "pip ran out of disk ($*)"
        return $rc
    fi
}
smoke() {  # the release's parser reads one line, through the driver the tests use
    local venv="$1" engine="$2"
    local line='["vllm", "serve", "M", "--tensor-parallel-size", "2"]'
    [ "$engine" = sglang ] && line='["python", "-m", "sglang.launch_server", "--model-path", "M", "--tp-size", "2"]'
    printf '%s\n' "$line" | "$venv/bin/python" "$DRIVER" "$engine" 2>/dev/null \
        | "$venv/bin/python" -c 'import json,sys; d=json.loads(sys.stdin.readline()); sys.exit(0 if d.get("error") is None and d.get("tensor_parallel_size") == 2 else 1)'
}

"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is needed (the CPU torch file is cp311)")'
mkdir -p "$root"
total=$SECONDS

# The shared CPU torch.
torch_stamp="$root/_torch/.flightcheck-release"
if [ -f "$torch_stamp" ] && [ "$(cat "$torch_stamp")" = "${TORCH[*]}" ]; then
    echo "release venvs: reusing $root/_torch (${TORCH[*]}), size $(size "$root/_torch")"
else
    if awk -v f="$(free_gib "$root")" -v n="$NEED_GIB" 'BEGIN { exit !(f < n) }'; then
        no_disk "too little disk before the install"
    fi
    start=$SECONDS
    partial="$root/_torch"
    rm -rf "$partial"
    tmp="$root/.tmp"
    mkdir -p "$tmp"
    TMPDIR="$tmp" pip_run "$PYTHON" install -q --target "$root/_torch" "${TORCH[@]}"
    rm -rf "$tmp" "$root/_torch/bin"
    echo "${TORCH[*]}" > "$torch_stamp"
    partial=
    echo "release venvs: $root/_torch (${TORCH[*]}) in $((SECONDS - start))s, size $(size "$root/_torch")"
fi

for spec in "${RELEASES[@]}"; do
    IFS='|' read -r name wheel packages stubs extras <<<"$spec"
    if [ -n "$ONLY" ] && [[ " $ONLY " != *" $name "* ]]; then
        continue
    fi
    engine="${name%%-*}"
    venv="$root/$name"
    stamp="$venv/.flightcheck-release"
    recipe="$wheel | $packages | stubs: $stubs | $extras | ${TORCH[*]} | $(cat "$STUBS" "$0" | sha1sum | cut -c1-12)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$recipe" ] && smoke "$venv" "$engine"; then
        echo "release venvs: reusing $venv, size $(size "$venv")"
        continue
    fi
    if awk -v f="$(free_gib "$root")" 'BEGIN { exit !(f < 1.5) }'; then
        no_disk "too little disk before $name"
    fi
    start=$SECONDS
    partial="$venv"
    rm -rf "$venv"
    tmp="$venv.tmp"
    mkdir -p "$tmp"
    export TMPDIR="$tmp"
    "$PYTHON" -m venv "$venv"
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    # shellcheck disable=SC2086  # the package lists are words
    pip_run "$venv/bin/python" install -q --no-deps "$wheel"
    find "$site/$engine" -name '*.so' -delete
    # shellcheck disable=SC2086
    pip_run "$venv/bin/python" install -q $packages
    echo "$root/_torch" > "$site/_fc_release_torch.pth"
    cp "$STUBS" "$site/_fc_release_stubs.py"
    printf '%s\n' $stubs > "$site/_fc_release_stubs.txt"
    echo "import _fc_release_stubs" > "$site/_fc_release_stubs.pth"
    if [[ " $extras " == *" vllm-cpu-platform "* ]]; then
        info="$site/fc_release_platform-0.dist-info"
        mkdir -p "$info"
        printf 'Metadata-Version: 2.1\nName: fc-release-platform\nVersion: 0\n' > "$info/METADATA"
        printf '[vllm.platform_plugins]\nfc_cpu = _fc_release_platform:cpu\n' > "$info/entry_points.txt"
        : > "$info/RECORD"
        printf '"""The CPU platform for a release venv (scripts/release_venvs.sh)."""\n\n\ndef cpu():\n    return "vllm.platforms.cpu.CpuPlatform"\n' > "$site/_fc_release_platform.py"
    fi
    rm -rf "$tmp"
    unset TMPDIR
    if ! smoke "$venv" "$engine"; then
        echo "release venvs: the $name parser does not work in $venv:" >&2
        printf '["vllm", "serve", "M"]\n' | "$venv/bin/python" "$DRIVER" "$engine" >&2 || true
        exit 1
    fi
    echo "$recipe" > "$stamp"
    partial=
    echo "release venvs: $venv ready in $((SECONDS - start))s, size $(size "$venv")"
done
echo "release venvs: done in $((SECONDS - total))s, $(size "$root") in all at $root"
