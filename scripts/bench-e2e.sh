#!/usr/bin/env bash
# bench-e2e.sh runs the end-to-end benchmark of the long-running mode
# (bench/e2e, a Go module of its own next to the library, like tools/)
# against its own local stand-ins: it installs them if needed
# (scripts/standins.sh install), builds the benchmark, starts a fresh set of
# stand-ins, runs the benchmark and stops that set again, also when the
# benchmark fails or is interrupted.
#
# Usage: scripts/bench-e2e.sh [bench/e2e flags]
#
#   scripts/bench-e2e.sh                     60,000 records × 512 B, 4 shards, Limit 500,
#                                            10 sequential and 10 concurrent rounds of the plain
#                                            loop, the consumer (in-memory, DynamoDB) and the peer
#                                            harlow/kinesis-consumer v0.5.0 (in-memory, DynamoDB),
#                                            two kill -9 tests (about 20–25 minutes, of which
#                                            kinesis-local takes about 6 to take the records)
#   scripts/bench-e2e.sh -records 20000      the same over 20,000 records (about 6–10 minutes;
#                                            a worker's start and stop weigh three times as much
#                                            per record, see BENCHMARKS.md)
#   scripts/bench-e2e.sh -peers=false        without the peer (3 phases, about 12–15 minutes)
#   scripts/bench-e2e.sh -records 5000 -rounds 2 -concurrent-rounds 3   a quick look
#   scripts/bench-e2e.sh -limit 250 -rounds 3 -concurrent-rounds 3
#   scripts/bench-e2e.sh -records 20000 -handler-wait 1ms -rounds 5 -concurrent-rounds 0 -skip-kill
#                                            a handler that waits 1 ms per record (a call downstream)
#   scripts/bench-e2e.sh -cpuprofile-dir /tmp/prof
#   (cd bench/e2e && go run . -h)            every flag
#
# The benchmark prints a table, PASS or MISS per target, and a final JSON line
# (the figures of BENCHMARKS.md). It exits 0 unless the benchmark itself broke.
#
# The stand-ins of this script are separate from those of the tests, so a
# running `make integration` is neither disturbed nor measured, and every run
# starts from a fresh kinesis-local (it slows down as it holds more data):
#
#   LAMBDAADAPTER_BENCH_STANDINS_DIR   logs and pid files (default <repo>/.standins-bench)
#   LAMBDAADAPTER_BENCH_KINESIS_PORT   kinesis-local plain HTTP port (default 4668)
#   LAMBDAADAPTER_BENCH_KINESIS_TLS_PORT  kinesis-local TLS port, unused (default 4667)
#   LAMBDAADAPTER_BENCH_DYNAMODB_PORT  dynalite port (default 4669)
#   LAMBDAADAPTER_BENCH_SQS_PORT       fauxqs port, unused but always started (default 4676)
#
# Results depend on the machine: kinesis-local is a single Node.js process and
# the readers wait for it. Run it on an otherwise idle machine.
set -euo pipefail

here="${BASH_SOURCE[0]}"
[[ "$here" == */* ]] || here="./$here"
root="$(cd "${here%/*}/.." && pwd)"
cd "$root"

export LAMBDAADAPTER_STANDINS_DIR="${LAMBDAADAPTER_BENCH_STANDINS_DIR:-$root/.standins-bench}"
export LAMBDAADAPTER_KINESIS_PORT="${LAMBDAADAPTER_BENCH_KINESIS_PORT:-4668}"
export LAMBDAADAPTER_KINESIS_TLS_PORT="${LAMBDAADAPTER_BENCH_KINESIS_TLS_PORT:-4667}"
export LAMBDAADAPTER_DYNAMODB_PORT="${LAMBDAADAPTER_BENCH_DYNAMODB_PORT:-4669}"
export LAMBDAADAPTER_SQS_PORT="${LAMBDAADAPTER_BENCH_SQS_PORT:-4676}"
state="$LAMBDAADAPTER_STANDINS_DIR"

command -v go >/dev/null 2>&1 || {
	echo "bench-e2e: go is not on PATH; install Go (see go.mod for the version) and run this again" >&2
	exit 1
}

scripts/standins.sh install
# Build before starting anything, so a compile error leaves nothing running.
# The benchmark is its own module (bench/e2e/go.mod, which replaces the
# library with this checkout), so it is built from its directory.
mkdir -p "$state"
bin="$(cd "$state" && pwd)/bench"
(cd bench/e2e && go build -o "$bin" .)

cleanup() {
	scripts/standins.sh stop || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

scripts/standins.sh start
eval "$(scripts/standins.sh env)"

"$bin" \
	-kinesis-endpoint "$AWS_ENDPOINT_URL_KINESIS" \
	-dynamodb-endpoint "$AWS_ENDPOINT_URL_DYNAMODB" \
	-kinesis-pid "$(cat "$state/kinesis.pid")" \
	-dynamodb-pid "$(cat "$state/dynamodb.pid")" \
	"$@"
