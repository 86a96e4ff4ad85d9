#!/usr/bin/env bash
# together.sh LANE...: run each lane (a space-separated list of make targets, made in order by one
# `make`) side by side with the others; every output line comes as it is written, prefixed with the
# lane's first target in brackets; at the end one line per lane with its time and exit status.
# Exits 1 when a lane failed (naming it), after every lane has ended. An empty lane is skipped.
# make test uses it for steps that start no shared daemon and measure nothing (Makefile, "Lanes").
set -uo pipefail
make_cmd=${MAKE:-make}
names=() pids=()
for lane in "$@"; do
  [ -n "${lane// /}" ] || continue
  name=${lane%% *}
  case "$name" in *[!A-Za-z0-9._-]*) echo "together: bad target name '$name'" >&2; exit 2 ;; esac
  (
    start=$(date +%s)
    # shellcheck disable=SC2086  # the lane is a list of targets
    PYTHONUNBUFFERED=1 $make_cmd --no-print-directory $lane 2>&1 | sed -u "s/^/[$name] /"
    rc=$?
    status="ok"
    [ "$rc" -eq 0 ] || status="FAILED (exit $rc)"
    echo "together: [$name] ($lane) $status in $(( $(date +%s) - start )) s"
    exit "$rc"
  ) &
  names+=("$name") pids+=($!)
done
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "together: failed: ${failed[*]}" >&2
  exit 1
fi
