#!/usr/bin/env bash
# Slurm HealthCheckProgram / Prolog: drain a GPU node on which an LLM launch would fail.
#
#   slurm.conf:  HealthCheckProgram=/etc/slurm/flightcheck-slurm.sh
#                HealthCheckInterval=300
#                HealthCheckNodeState=ANY      (IDLE to check only nodes without jobs)
#   or:          Prolog=/etc/slurm/flightcheck-slurm.sh
#
# - flightcheck not ready (exit 1): `scontrol update NodeName=<node> State=DRAIN
#   Reason="flightcheck: FC301 fabric-not-ready (+1)"`. A node already drained for another
#   reason keeps that reason: an administrator's note is never overwritten.
# - ready (exit 0): a node drained with a "flightcheck:" reason is resumed; nodes drained
#   for any other reason are left alone (like NHC, only our own reasons are undone).
# - flightcheck could not tell (bad usage 2, unknown 3, timeout): nothing changes. A
#   transient failure to read the node must not drain a fleet.
# Slurm kills a HealthCheckProgram after 60 s, so flightcheck gets FLIGHTCHECK_TIMEOUT
# (default 40 s) and each scontrol call 5 s. As a Prolog (SLURM_JOB_ID is set) a drain also
# exits 1, so the job is requeued instead of starting on this node.
#
# /etc/default/flightcheck (optional, sourced) may set:
#   FLIGHTCHECK_ARGS   flags for `flightcheck check`, default "-tp <GPUs on this node>"
#   FLIGHTCHECK        the command (default: flightcheck)
#   FLIGHTCHECK_TIMEOUT, SCONTROL, FLIGHTCHECK_SLURM_LOG (default: syslog via logger)
set -u

[ -r /etc/default/flightcheck ] && . /etc/default/flightcheck

FLIGHTCHECK="${FLIGHTCHECK:-flightcheck}"
SCONTROL="${SCONTROL:-scontrol}"
TIMEOUT="${FLIGHTCHECK_TIMEOUT:-40}"
NODE="${SLURMD_NODENAME:-$(hostname -s)}"
PREFIX="flightcheck:"

log() {
    if [ -n "${FLIGHTCHECK_SLURM_LOG:-}" ]; then
        printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >>"$FLIGHTCHECK_SLURM_LOG"
    else
        logger -t flightcheck-slurm -- "$*" 2>/dev/null || printf '%s\n' "$*" >&2
    fi
}

if [ -z "${FLIGHTCHECK_ARGS+set}" ]; then
    # every GPU of the node, counted without touching the driver (a hung GPU cannot hang us)
    gpus=$(find /dev -maxdepth 1 -name 'nvidia[0-9]*' 2>/dev/null | wc -l)
    [ "$gpus" -ge 1 ] || gpus=1
    FLIGHTCHECK_ARGS="-tp $gpus"
fi

# shellcheck disable=SC2086  # FLIGHTCHECK_ARGS is a list of flags
out="$(timeout -k 5 "$TIMEOUT" "$FLIGHTCHECK" check --format prometheus $FLIGHTCHECK_ARGS 2>/dev/null)"
rc=$?

failing_checks() {
    # "FC301 fabric-not-ready" per failing check of the given severity pattern, once each
    printf '%s\n' "$out" \
        | grep -E "^flightcheck_check_status\{[^}]*severity=\"($1)\"[^}]*\} 1\$" \
        | sed -E 's/^[^{]*\{code="([^"]*)",name="([^"]*)".*/\1 \2/' \
        | sort -u
}

node_info="$(timeout -k 2 5 "$SCONTROL" show node "$NODE" 2>/dev/null)"
state="$(printf '%s\n' "$node_info" | sed -n -E 's/^[[:space:]]*State=([^[:space:]]+).*/\1/p' | head -n 1)"
reason="$(printf '%s\n' "$node_info" | sed -n -E 's/^[[:space:]]*Reason=(.*)$/\1/p' | head -n 1)"
drained=no
case "$state" in *DRAIN*) drained=yes ;; esac
ours=no
case "$reason" in "$PREFIX"*) ours=yes ;; esac

case "$rc" in
    0)
        if [ "$drained" = yes ] && [ "$ours" = yes ]; then
            if timeout -k 2 5 "$SCONTROL" update NodeName="$NODE" State=RESUME; then
                log "$NODE: ready again, resumed (was: $reason)"
            else
                log "$NODE: ready again, but scontrol could not resume it"
            fi
        fi
        exit 0
        ;;
    1)
        failing="$(failing_checks 'error')"
        [ -n "$failing" ] || failing="$(failing_checks 'error|warning')"  # --strict: a warning blocked
        [ -n "$failing" ] || failing="not ready"
        n="$(printf '%s\n' "$failing" | grep -c .)"
        new_reason="$PREFIX $(printf '%s\n' "$failing" | head -n 1)"
        [ "$n" -gt 1 ] && new_reason="$new_reason (+$((n - 1)))"
        new_reason="$(printf '%s' "$new_reason" | cut -c 1-120)"
        if [ "$drained" = yes ] && [ "$ours" = no ]; then
            log "$NODE: not ready ($new_reason) but already drained for: $reason; left as is"
        elif timeout -k 2 5 "$SCONTROL" update NodeName="$NODE" State=DRAIN Reason="$new_reason"; then
            log "$NODE: drained: $new_reason"
        else
            log "$NODE: not ready ($new_reason) and scontrol could not drain it"
        fi
        [ -n "${SLURM_JOB_ID:-}" ] && exit 1  # Prolog: do not start the job here
        exit 0
        ;;
    *)
        log "$NODE: flightcheck could not check this node (exit $rc); node left as is"
        exit 0
        ;;
esac
