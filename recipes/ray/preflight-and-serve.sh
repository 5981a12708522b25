#!/usr/bin/env bash
# Check every node of a Ray cluster, then start a multi-node vLLM only if the launch would
# work there. Run it on the Ray head node, where `vllm serve` would run:
#
#   head:     ray start --head --port=6379
#   workers:  ray start --address=<head>:6379          (flightcheck installed in the same env)
#   head:     TP=8 PP=2 ./preflight-and-serve.sh /models/Kimi-K3-MXFP4 --max-model-len 128k
#
# `flightcheck cluster --ray` sends one collection task to each alive GPU node (pinned to
# it; nothing but collection runs there, with the node's own FLIGHTCHECK_FACTS honoured),
# judges every node as `flightcheck check` would and compares them (FC801-FC805). A node
# that does not answer within COLLECT_TIMEOUT is FC803. Exit 0: `vllm serve` starts (with
# the flightcheck vLLM plugin installed, each process still applies its node's fallback
# plan); exit 1 (would fail) or 3 (could not tell; ALLOW_UNKNOWN=1 to go ahead anyway):
# nothing is started and the report says what to fix.
#
# Knobs (environment): TP (default 8), PP (default 1), RAY_ADDRESS (default: the local
# cluster), COLLECT_TIMEOUT seconds (default 60), FLIGHTCHECK / VLLM (the commands).
set -euo pipefail

MODEL="${1:?usage: $0 MODEL [more vllm serve arguments]}"
shift
TP="${TP:-8}"
PP="${PP:-1}"
COLLECT_TIMEOUT="${COLLECT_TIMEOUT:-60}"
FLIGHTCHECK="${FLIGHTCHECK:-flightcheck}"
VLLM="${VLLM:-vllm}"

rc=0
"$FLIGHTCHECK" cluster --ray "${RAY_ADDRESS:-auto}" --model "$MODEL" -tp "$TP" -pp "$PP" --distributed-executor-backend ray --timeout "$COLLECT_TIMEOUT" || rc=$?
case "$rc" in
    0) ;;
    3) if [ "${ALLOW_UNKNOWN:-0}" != 1 ]; then
           echo "preflight: a blocking check could not be evaluated; not starting vLLM (ALLOW_UNKNOWN=1 overrides)" >&2
           exit 3
       fi ;;
    *) echo "preflight: the launch would fail (exit $rc); not starting vLLM" >&2
       exit "$rc" ;;
esac

exec "$VLLM" serve "$MODEL" --distributed-executor-backend ray --tensor-parallel-size "$TP" --pipeline-parallel-size "$PP" "$@"
