#!/usr/bin/env bash
# make demo: the whole adapter end to end on this machine, against local
# stand-ins for AWS, in well under three minutes (about 30 s once installed).
# Needs Go and Node.js 20 or newer; it never touches an AWS account (every
# endpoint is 127.0.0.1, the credentials are dummies).
#
#   1. installs and starts the stand-ins (scripts/standins.sh: kinesis-local,
#      dynalite, fauxqs), unless they are already running
#   2. builds bin/bootstrap and installs the Lambda Runtime Interface Emulator
#      (scripts/install-rie.sh)
#   3. runs the driver (integration/demo): phase 1 sends a few thousand sample
#      records (acks, poison, transient failures, delays, replies) through a
#      local Kinesis + SQS event-source loop into bin/bootstrap under the
#      emulator; phase 2 sends a second batch through two bin/bootstrap
#      -mode=ecs workers sharing a DynamoDB lease table. Each phase shows a
#      live progress line and ends with a summary (lost must be 0).
#   4. stops everything it started (emulator, workers, stand-ins), also on
#      failure and on Ctrl-C.
#
# Environment: LAMBDAADAPTER_DEMO_RECORDS (records per phase, default 2000),
# LAMBDAADAPTER_RIE (the emulator's path), and the stand-ins' port variables
# (see scripts/standins.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
records="${LAMBDAADAPTER_DEMO_RECORDS:-2000}"
rie="${LAMBDAADAPTER_RIE:-$root/bin/aws-lambda-rie}"

command -v go >/dev/null 2>&1 || { echo "demo: go is not on PATH; install Go (https://go.dev/dl/)" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/lambdaadapter-demo.XXXXXX")"
started_standins=0
ok=0
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	# The driver stops its processes itself; this catches any it left
	# behind if it was killed (only ours: the command line must match).
	if [[ -f "$work/pids" ]]; then
		local pid name
		while read -r pid name; do
			if kill -0 "$pid" 2>/dev/null && ps -p "$pid" -o args= 2>/dev/null | grep -qE 'aws-lambda-rie|bootstrap'; then
				echo "demo: stopping leftover $name (pid $pid)"
				kill -TERM "$pid" 2>/dev/null || true
				sleep 2
				kill -KILL "$pid" 2>/dev/null || true
			fi
		done <"$work/pids"
	fi
	if ((started_standins)); then
		echo
		scripts/standins.sh stop || true
	fi
	if ((ok)); then
		rm -rf "$work"
	else
		echo "demo: failed or interrupted; the processes' logs are in $work/logs" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$SECONDS
echo "== Stand-ins for AWS (kinesis-local, dynalite, fauxqs) on 127.0.0.1"
scripts/standins.sh install
if scripts/standins.sh status >/dev/null 2>&1; then
	echo "demo: the stand-ins are already running; using them (and leaving them running)"
else
	started_standins=1
	scripts/standins.sh start
fi
eval "$(scripts/standins.sh env)"

echo
echo "== Building bin/bootstrap (CGO_ENABLED=0, -tags lambda.norpc) and the demo driver"
CGO_ENABLED=0 go build -tags lambda.norpc -o bin/bootstrap ./cmd/bootstrap
(cd integration && go build -o "$work/demo" ./demo)
LAMBDAADAPTER_RIE="$rie" scripts/install-rie.sh

"$work/demo" -bootstrap bin/bootstrap -rie "$rie" -logs "$work/logs" -pidfile "$work/pids" \
	-lambda-records "$records" -ecs-records "$records"
ok=1
echo
echo "demo: finished in $((SECONDS - start))s"
