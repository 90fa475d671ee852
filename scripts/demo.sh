#!/usr/bin/env bash
# make demo: builds the Lambda binary (cmd/bootstrap, with its demonstration
# handler), runs it under the AWS Lambda Runtime Interface Emulator on
# loopback, sends it real-shaped Kinesis events and prints what it answers.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
rie="${LAMBDAADAPTER_RIE:-$root/bin/aws-lambda-rie}"
[[ -x "$rie" ]] || { echo "demo: the Runtime Interface Emulator is missing; run: make tools" >&2; exit 1; }
port="${LAMBDAADAPTER_DEMO_PORT:-9000}"
api_port="${LAMBDAADAPTER_DEMO_API_PORT:-9001}"
url="http://127.0.0.1:$port/2015-03-31/functions/function/invocations"
work="$(mktemp -d)"
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then
    pkill -P "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== building bin/bootstrap (CGO_ENABLED=0, -tags lambda.norpc)"
CGO_ENABLED=0 go build -tags lambda.norpc -o bin/bootstrap ./cmd/bootstrap

echo "== starting the Runtime Interface Emulator on 127.0.0.1:$port"
env -i PATH="$PATH" HOME="${HOME:-/tmp}" AWS_LAMBDA_FUNCTION_TIMEOUT=3 \
  AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo \
  LAMBDAADAPTER_LOG_LEVEL=info LAMBDAADAPTER_DEADLINE_MARGIN=500ms \
  "$rie" --runtime-interface-emulator-address "127.0.0.1:$port" \
  --runtime-api-address "127.0.0.1:$api_port" "$root/bin/bootstrap" >"$work/rie.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done

invoke() {
  local title="$1" file="$2"
  echo
  echo "== $title"
  echo "   event: $file ($(grep -c '"sequenceNumber"' "$file") records)"
  local start end
  start=$(date +%s%N)
  local out
  out=$(curl -sS -X POST --data-binary @"$file" "$url")
  end=$(date +%s%N)
  echo "   response in $(( (end - start) / 1000000 )) ms: $out"
}

invoke "every record acked or dropped (some carry RSK1 headers)" integration/testdata/all_ack.json
invoke "a record in the middle asks for a retry: exactly its sequence number comes back" integration/testdata/retry_middle.json
invoke "the first record's handler panics: recovered, reported, the rest untouched" integration/testdata/panic_first.json
invoke "two shards in one (test) event: the first unsettled record of each" integration/testdata/multi_shard.json
invoke "a handler still running at the deadline minus the margin (timeout 3s)" integration/testdata/deadline.json
invoke "a malformed invocation: a clear error, nothing handled" integration/testdata/truncated.json

echo
echo "== the function's structured logs (JSON, with the Lambda request id)"
grep -E '^\{' "$work/rie.log" | head -20 || true
