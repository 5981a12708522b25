#!/usr/bin/env bash
# node-problem-detector custom plugin: would an LLM launch work on this GPU node?
#
# NPD's contract: exit 0 = OK, 1 = problem, anything else = unknown; the first line of
# stdout is the condition message (NPD keeps max_output_length = 80 characters).
# flightcheck's exit codes map onto it:
#   0 ready / ready with fallbacks -> 0 OK
#   1 not ready                    -> 1 problem, "flightcheck: FC301 fabric-not-ready (+2)"
#   2 bad usage, 3 unknown,
#   a timeout or a crash           -> 3 unknown (never a false "problem")
#
# The rule's "args" in flightcheck-monitor.json are passed to `flightcheck check` (the
# launch this node must be able to serve, e.g. -tp 8). Environment: FLIGHTCHECK (the
# command, default `flightcheck`), FLIGHTCHECK_TIMEOUT (seconds, default 50: below the
# rule's 60 s timeout).
set -u

FLIGHTCHECK="${FLIGHTCHECK:-flightcheck}"
TIMEOUT="${FLIGHTCHECK_TIMEOUT:-50}"

# Prometheus text is line-oriented: the failing codes come out with grep/sed, no jq needed.
out="$(timeout -k 5 "$TIMEOUT" "$FLIGHTCHECK" check --format prometheus "$@" 2>/dev/null)"
rc=$?

failing() {
    # "FC301 fabric-not-ready" per failing check of the given severity pattern, once each
    printf '%s\n' "$out" \
        | grep -E "^flightcheck_check_status\{[^}]*severity=\"($1)\"[^}]*\} 1\$" \
        | sed -E 's/^[^{]*\{code="([^"]*)",name="([^"]*)".*/\1 \2/' \
        | sort -u
}

case "$rc" in
    0)
        msg="flightcheck: ready"
        if printf '%s\n' "$out" | grep -q '^flightcheck_verdict{verdict="ready-with-fallbacks"} 1$'; then
            msg="flightcheck: ready with fallbacks"
        fi
        warnings="$(failing 'warning' | cut -d' ' -f1 | paste -sd, -)"
        [ -n "$warnings" ] && msg="$msg (warnings: $warnings)"
        status=0
        ;;
    1)
        list="$(failing 'error')"
        [ -n "$list" ] || list="$(failing 'error|warning')"  # --strict: a warning blocked
        n="$(printf '%s\n' "$list" | grep -c .)"
        msg="flightcheck: $(printf '%s\n' "$list" | head -n 1)"
        [ "$n" -gt 1 ] && msg="$msg (+$((n - 1)))"
        status=1
        ;;
    124 | 137)
        msg="flightcheck: no answer within ${TIMEOUT}s"
        status=3
        ;;
    *)
        msg="flightcheck: could not check this node (exit $rc)"
        status=3
        ;;
esac

printf '%s\n' "${msg:0:80}"
exit "$status"
