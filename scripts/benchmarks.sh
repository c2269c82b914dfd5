#!/usr/bin/env bash
# Runs every bench and writes docs/BENCHMARKS.md: one table per bench, with the command that
# made it. Nothing in that file is written by hand.
#
#   scripts/benchmarks.sh                  every bench in full (optimised build), into docs/BENCHMARKS.md
#   scripts/benchmarks.sh --quick [FILE]   fewer rounds and samples, the 60 s jobs and the
#                                          concurrent instruction counts left out, in the test
#                                          profile, into FILE (default: a temporary file); CI
#                                          runs this to check that the script works. Its figures
#                                          are not for publishing.
#
# Needs python3, redis-server (the `redis` bench), and valgrind with gungraun-runner (the
# `instructions` bench: `cargo install gungraun-runner --version 0.20.0 --locked`).
# CARGO (default `cargo`) is the command that runs cargo, e.g. CARGO="nice -n 10 cargo".
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
out=docs/BENCHMARKS.md
if [ "${1:-}" = "--quick" ]; then
    quick=true
    out=${2:-$(mktemp "${TMPDIR:-/tmp}/benchmarks.XXXXXX.md")}
elif [ $# -gt 0 ]; then
    echo "usage: $0 [--quick [FILE]]" >&2
    exit 2
fi
read -r -a cargo <<<"${CARGO:-cargo}"

# Quick: the test profile and every feature, as `cargo test --all-features --benches --no-run`
# already built them in CI, and fewer rounds and samples. Full: the bench profile, default
# features (the `redis` bench adds `redis`), as a user builds the crate.
if $quick; then
    export BENCH_QUICK=1 SOLE_USER_QUICK=1
    build=(--profile test --all-features)
    redis_build=("${build[@]}")
    criterion_args=(--warm-up-time 0.05 --measurement-time 0.1 --sample-size 10 --noplot)
    instruction_filter=('*::create_pet_*')
else
    unset BENCH_QUICK SOLE_USER_QUICK
    build=()
    redis_build=(--features redis)
    criterion_args=(--noplot)
    instruction_filter=()
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/benchmarks.XXXXXX")
trap 'rm -rf "$work"' EXIT
criterion_dir=$work/criterion

# bench NAME TITLE COMMAND... : runs the command, keeps its stdout in $work/NAME.out, and
# starts the bench's section (title and the command a reader runs) in $work/NAME.md.
bench() {
    local name=$1 title=$2
    shift 2
    local started=$SECONDS
    echo "== $name" >&2
    "$@" >"$work/$name.out"
    echo "== $name took $((SECONDS - started)) s" >&2
    printf '## %s\n\n' "$title" >"$work/$name.md"
}

# A bench's report: its stdout from the line that starts with FIRST (default: all of it), as
# criterion's own lines come before the report.
tables() {
    python3 - "$@" <<'EOF'
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
if len(sys.argv) > 2:
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith(sys.argv[2])):]
# A table needs an empty line before it to be one.
spaced = []
for line in lines:
    if line.startswith("|") and spaced and spaced[-1] and not spaced[-1].startswith("|"):
        spaced.append("")
    spaced.append(line)
lines = spaced
print(re.sub(r"\n{3,}", "\n\n", "\n".join(lines).strip()))
EOF
}

command_line() { printf 'Made by `%s`.\n\n' "$*"; }

# paired: wall-clock ratios, ABBA.
bench paired "Overhead against raw reqwest, paired" \
    "${cargo[@]}" bench --quiet "${build[@]}" --bench paired
{
    command_line cargo bench --bench paired
    echo "Each call made with the crate against the same call made with the same \`reqwest::Client\` and"
    echo "\`serde_json\`, on a loopback server answering fixed bytes; both sides alternate (ABBA) round"
    echo "after round, and the median per-round ratio is given with its interquartile range."
    echo
    tables "$work/paired.out"
} >>"$work/paired.md"

# decode: wall-clock ratios, ABBA.
bench decode "Decoding against serde_json, paired" \
    "${cargo[@]}" bench --quiet "${build[@]}" --bench decode
{
    command_line cargo bench --bench decode
    echo "The crate's decoding of a list of pets against \`serde_json::from_slice\` on the same bytes;"
    echo "both sides alternate (ABBA) round after round, and the median per-round ratio is given"
    echo "with its interquartile range."
    echo
    tables "$work/decode.out"
} >>"$work/decode.md"

bench allocations "Allocations per call" \
    "${cargo[@]}" bench --quiet "${build[@]}" --bench allocations
{
    command_line cargo bench --bench allocations
    echo "Counted on the client's thread by a global allocator, against the raw baseline."
    echo
    tables "$work/allocations.out"
} >>"$work/allocations.md"

# instructions: callgrind through gungraun, one JSON line per benchmark.
bench instructions "Instructions per call" \
    "${cargo[@]}" bench --quiet "${build[@]}" --bench instructions -- \
    --output-format=json "${instruction_filter[@]}"
{
    command_line cargo bench --bench instructions
    echo "Instructions on the client's thread, counted by callgrind; the concurrent rows are the"
    echo "total divided by the calls in flight."
    echo
    python3 - "$work/instructions.out" <<'EOF'
import json, re, sys

rows = {}
for line in open(sys.argv[1], encoding="utf-8"):
    if not line.startswith("{"):
        continue
    summary = json.loads(line)
    function, bench_id = summary["function_name"], summary["id"]
    # A concurrent bench's description is its set-up call, e.g. `(tasks(32))`.
    found = re.search(r"\((?:tasks|held)\((\d+)\)\)", summary.get("description") or "")
    tasks = int(found.group(1)) if found else 1
    ir = summary["profiles"][0]["data"]["total"]["metrics"]["Ir"]["values"]["new"]
    rows[(function, tasks)] = ir / tasks

print("| call | tasks | crate | raw | crate/raw |")
print("| --- | --- | --- | --- | --- |")
pairs = {}
for (function, tasks), per_call in rows.items():
    for suffix in ("_crate_behind_probe", "_crate", "_raw"):
        if function.endswith(suffix):
            pairs.setdefault((function[: -len(suffix)], tasks), {})[suffix] = per_call
            break
# One call of each operation first, then the concurrent ones by the number of tasks.
for (name, tasks), sides in sorted(pairs.items(), key=lambda item: (item[0][0].startswith("concurrent"), item[0][1], item[0][0])):
    raw = sides.get("_raw")
    for suffix, label in (("_crate", name), ("_crate_behind_probe", f"{name}, the first call probing")):
        if suffix in sides:
            ratio = f"{sides[suffix] / raw:.3f}" if raw else ""
            raw_text = f"{raw:,.0f}" if raw else ""
            print(f"| {label} | {tasks} | {sides[suffix]:,.0f} | {raw_text} | {ratio} |")
EOF
} >>"$work/instructions.md"

bench sole_user "A key's only user on the real clock" \
    "${cargo[@]}" bench --quiet "${build[@]}" --bench sole_user
{
    command_line cargo bench --bench sole_user
    tables "$work/sole_user.out"
} >>"$work/sole_user.md"

bench goodput "The scenario matrix, and a sole user's burst, on a paused clock" \
    "${cargo[@]}" bench --quiet "${build[@]}" --bench goodput
{
    command_line cargo bench --bench goodput
    echo "What each cell is and what its columns count: [ban-matrix.md](ban-matrix.md)."
    echo
    tables "$work/goodput.out"
} >>"$work/goodput.md"

bench redis "The Redis shared state's cost" \
    env CRITERION_HOME="$criterion_dir" "${cargo[@]}" bench --quiet "${redis_build[@]}" \
    --bench redis -- "${criterion_args[@]}"
{
    command_line cargo bench --features redis --bench redis
    tables "$work/redis.out" "Latency per call"
} >>"$work/redis.md"

{
    echo "# Benchmarks"
    echo
    if $quick; then
        echo "Generated by \`scripts/benchmarks.sh --quick\`: fewer rounds in an unoptimised build, to check"
        echo "the script. These figures are not for publishing."
    else
        echo "Generated by \`scripts/benchmarks.sh\`; do not edit by hand. Each bench compares the crate"
        echo "against a baseline measured in the same run, on loopback, so that its ratios carry over from"
        echo "one machine to another better than its times do."
    fi
    for name in paired decode allocations instructions sole_user goodput redis; do
        echo
        cat "$work/$name.md"
    done
} >"$out"
echo "wrote $out" >&2
