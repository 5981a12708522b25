#!/usr/bin/env bash
# Build once on a build box, ship the bundle on the shared filesystem, install it on each
# node's engine venv before the job, offline.
#
#   1. on the build box (a CUDA toolkit of torch's CUDA major, no GPU needed):
#        recipes/prepare/slurm-prepare.sh build /shared/bundles/b300 -- vllm serve /models/M -tp 8
#   2. on every node (a Prolog, or one task per node):
#        srun --ntasks-per-node=1 recipes/prepare/slurm-prepare.sh install /shared/bundles/b300
#      With the engine venv itself on the shared filesystem, run step 2 once anywhere.
#   3. launch with the environment step 2 printed (also written to BUNDLE/launch.env).
#
# ENGINE_PY (default: python3 of the engine venv on PATH) and ARCH (default: read from this
# node's facts when NODE_FACTS names a `flightcheck collect` snapshot, else 10.3a) may be set.
set -euo pipefail

FLIGHTCHECK="${FLIGHTCHECK:-flightcheck}"
ENGINE_PY="${ENGINE_PY:-python3}"
what="${1:-}"
bundle="${2:-}"
if [ -z "$what" ] || [ -z "$bundle" ]; then
    echo "usage: $0 build BUNDLE -- <engine command> | $0 install BUNDLE" >&2
    exit 2
fi
shift 2

case "$what" in
    build)
        if [ -n "${NODE_FACTS:-}" ]; then
            target=(--for "$NODE_FACTS")
        else
            target=(--arch "${ARCH:-10.3a}")
        fi
        exec "$FLIGHTCHECK" prepare "${target[@]}" --python "$ENGINE_PY" -o "$bundle" "$@"
        ;;
    install)
        # offline: pip --no-index from the bundle's wheelhouse; the modules go into the venv's
        # flashinfer/data/aot. A bundle that does not fit this node is refused (exit 2).
        "$FLIGHTCHECK" prepare install "$bundle" --python "$ENGINE_PY" > "$bundle/launch.env.$(hostname)"
        cat "$bundle/launch.env.$(hostname)"
        ;;
    *)
        echo "$0: unknown step $what (build or install)" >&2
        exit 2
        ;;
esac
