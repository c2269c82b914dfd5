#!/usr/bin/env bash
# Runs the README's test command N times (default 10) while both cores are kept busy, and
# prints `N passed, N failed` with the names of the tests that failed. A suite that passes
# here passes on a loaded CI machine.
#
#   scripts/stress-tests.sh [N] [extra cargo test arguments...]
#
# The load is one `yes > /dev/null` loop per core, started here and stopped by PID on exit.
# Each run's output is kept in target/stress/run-K.log.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${1:-10}
shift $(($# > 0 ? 1 : 0))
case $runs in
    '' | *[!0-9]*) echo "usage: $0 [N] [cargo test arguments...]" >&2; exit 2 ;;
esac

logs=${CARGO_TARGET_DIR:-target}/stress
mkdir -p "$logs"
# Build first, unloaded and outside the count: the load is for the tests, not the compiler.
cargo test --all-features --no-run --quiet "$@" || exit 1

load=()
stop_load() {
    for pid in "${load[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
}
trap stop_load EXIT
for _ in $(seq "$(nproc)"); do
    yes >/dev/null &
    load+=($!)
done
echo "load: ${#load[@]} busy loops (PIDs ${load[*]}) on $(nproc) cores"

passed=0
failed=0
declare -A failures=()
for run in $(seq "$runs"); do
    log="$logs/run-$run.log"
    start=$SECONDS
    if cargo test --all-features --no-fail-fast "$@" >"$log" 2>&1; then
        passed=$((passed + 1))
        verdict=passed
    else
        failed=$((failed + 1))
        verdict=FAILED
        # libtest's own lines: `test name ... FAILED`; a binary that could not start has none.
        names=$(grep -E '^test .* \.\.\. FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/')
        [ -n "$names" ] || names="(no failing test named: see $log)"
        while IFS= read -r name; do
            failures[$name]=$((${failures[$name]:-0} + 1))
        done <<<"$names"
    fi
    echo "run $run: $verdict in $((SECONDS - start)) s, load average $(cut -d' ' -f1 /proc/loadavg)"
done

if [ "${#failures[@]}" -gt 0 ]; then
    echo "failing tests (runs failed in):"
    for name in "${!failures[@]}"; do
        echo "  $name: ${failures[$name]}"
    done
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
