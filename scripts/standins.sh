#!/usr/bin/env bash
# standins.sh installs, starts and stops the local stand-ins for AWS that the
# integration tests talk to over the real wire protocols:
#
#   Kinesis   kinesis-local 0.6.2 (kinesis-mock)  http://127.0.0.1:4568  (TLS 4567)
#   DynamoDB  dynalite 4.0.0                      http://127.0.0.1:4569
#   SQS       fauxqs 1.9.2                        http://127.0.0.1:4576
#
# The versions are pinned in standins/package-lock.json (with integrity hashes).
#
# Usage: scripts/standins.sh install|start|stop|status|env
#
#   install  npm ci from standins/package-lock.json; does nothing when
#            standins/node_modules already matches the lockfile
#   start    starts the three in the background and waits until each answers a
#            real API call; does nothing for one that is already running
#   stop     stops what start started (by pid file); does nothing when stopped
#   status   shows each stand-in; exits 0 only when all three answer
#   env      prints the export lines for the AWS SDK and the tests:
#              eval "$(scripts/standins.sh env)"
#
# Environment:
#   LAMBDAADAPTER_KINESIS_PORT       Kinesis plain HTTP port (default 4568)
#   LAMBDAADAPTER_KINESIS_TLS_PORT   Kinesis TLS port, unused by the tests but
#                                    always opened (default 4567)
#   LAMBDAADAPTER_DYNAMODB_PORT      DynamoDB port (default 4569)
#   LAMBDAADAPTER_SQS_PORT           SQS port (default 4576)
#   LAMBDAADAPTER_STANDINS_DIR       logs and pid files (default <repo>/.standins)
#   LAMBDAADAPTER_STANDINS_TIMEOUT   seconds start waits for readiness (default 30)
#   LAMBDAADAPTER_KINESIS_LOG_LEVEL  kinesis-local LOG_LEVEL (default WARN)
#
# It works from any directory. kinesis-local and fauxqs listen on all
# interfaces (they have no bind option); dynalite listens on 127.0.0.1 only.
# Every client must use 127.0.0.1, as the env lines do.
set -euo pipefail

here="${BASH_SOURCE[0]}"
[[ "$here" == */* ]] || here="./$here"
root="$(cd "${here%/*}/.." && pwd)"
pkg="$root/standins"
mods="$pkg/node_modules"
state="${LAMBDAADAPTER_STANDINS_DIR:-$root/.standins}"
[[ "$state" == /* ]] || state="$PWD/$state"
timeout="${LAMBDAADAPTER_STANDINS_TIMEOUT:-30}"
services=(kinesis dynamodb sqs)

die() {
	echo "standins: $*" >&2
	exit 1
}

say() {
	echo "standins: $*"
}

# default_port prints the configured client port of service $1.
default_port() {
	case "$1" in
	kinesis) echo "${LAMBDAADAPTER_KINESIS_PORT:-4568}" ;;
	dynamodb) echo "${LAMBDAADAPTER_DYNAMODB_PORT:-4569}" ;;
	sqs) echo "${LAMBDAADAPTER_SQS_PORT:-4576}" ;;
	esac
}

# client_port prints the port clients should use for service $1: the one in
# the environment, else the one a running start recorded, else the default.
client_port() {
	local var
	var="$(port_var "$1")"
	if [[ -n "${!var:-}" ]]; then
		echo "${!var}"
	elif running "$1" && [[ -f "$state/$1.port" ]]; then
		cat "$state/$1.port"
	else
		default_port "$1"
	fi
}

# now_ms prints a wall clock in milliseconds (whole seconds on bash < 5).
now_ms() {
	if [[ -n "${EPOCHREALTIME:-}" ]]; then
		local t="${EPOCHREALTIME/[.,]/}"
		echo $((10#$t / 1000))
	else
		echo $((SECONDS * 1000))
	fi
}

port_var() {
	case "$1" in
	kinesis) echo LAMBDAADAPTER_KINESIS_PORT ;;
	dynamodb) echo LAMBDAADAPTER_DYNAMODB_PORT ;;
	sqs) echo LAMBDAADAPTER_SQS_PORT ;;
	esac
}

# marker prints a string that the command line of service $1 contains; stop
# checks it before killing a pid, in case the pid was reused.
marker() {
	case "$1" in
	kinesis) echo "kinesis-local/main.js" ;;
	dynamodb) echo "standins/dynalite.js" ;;
	sqs) echo "standins/fauxqs.js" ;;
	esac
}

check_port() {
	local name="$1" value="$2"
	[[ "$value" =~ ^[0-9]+$ ]] && ((value > 0 && value < 65536)) || die "$name=$value is not a port number"
}

need_node() {
	command -v node >/dev/null 2>&1 ||
		die "node is not on PATH; install Node.js 20 or newer (https://nodejs.org/) and run this again"
	local major
	major="$(node -p 'process.versions.node.split(".")[0]')"
	((major >= 20)) || die "node $(node --version) is too old; the stand-ins need Node.js 20 or newer"
}

need_npm() {
	command -v npm >/dev/null 2>&1 ||
		die "npm is not on PATH; install npm (it ships with Node.js 20 or newer) and run this again"
}

# installed succeeds when standins/node_modules holds every package of
# standins/package-lock.json at its locked version (however it was installed).
installed() {
	[[ -d "$mods" ]] || return 1
	node - "$pkg" <<'JS'
const path = require('path')
const dir = process.argv[2]
const lock = require(path.join(dir, 'package-lock.json'))
for (const [where, want] of Object.entries(lock.packages || {})) {
  if (where === '') continue
  let have
  try {
    have = require(path.join(dir, where, 'package.json')).version
  } catch (err) {
    if (want.optional) continue // not for this platform
    process.exit(1)
  }
  if (have !== want.version) process.exit(1)
}
JS
}

cmd_install() {
	need_node
	[[ -f "$pkg/package-lock.json" ]] || die "$pkg/package-lock.json is missing; the checkout is incomplete"
	if installed; then
		say "standins/node_modules already matches standins/package-lock.json; nothing to do"
		return
	fi
	need_npm
	say "installing kinesis-local, dynalite and fauxqs from standins/package-lock.json (npm ci)"
	local start=$SECONDS
	# --ignore-scripts: nothing here needs an install script (classic-level,
	# pulled in by dynalite, ships prebuilt binaries and is unused in memory).
	npm ci --prefix "$pkg" --ignore-scripts --no-audit --no-fund --loglevel=error ||
		die "npm ci failed (see above); check network access to the npm registry and run this again"
	say "installed in $((SECONDS - start))s"
}

pid_of() {
	local f="$state/$1.pid"
	[[ -f "$f" ]] && cat "$f"
}

# running succeeds when the pid file of service $1 names a live process whose
# command line is that service's.
running() {
	local pid
	pid="$(pid_of "$1")" || return 1
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	ps -p "$pid" -o args= 2>/dev/null | grep -qF "$(marker "$1")"
}

tail_log() {
	local log="$state/$1.log"
	if [[ -s "$log" ]]; then
		echo "---- last 20 lines of $log ----" >&2
		tail -n 20 "$log" >&2
		echo "----" >&2
	else
		echo "($log is empty)" >&2
	fi
}

launch() {
	local name="$1" port="$2" log="$state/$1.log"
	: >"$log"
	case "$name" in
	kinesis)
		# kinesis-local runs in the state dir so nothing it might write lands
		# in the repository.
		(
			cd "$state"
			export KINESIS_MOCK_PLAIN_PORT="$port" \
				KINESIS_MOCK_TLS_PORT="$kinesis_tls_port" \
				KINESIS_MOCK_CERT_PATH="$mods/kinesis-local/server.json" \
				CREATE_STREAM_DURATION=10ms DELETE_STREAM_DURATION=10ms \
				SPLIT_SHARD_DURATION=10ms MERGE_SHARDS_DURATION=10ms \
				UPDATE_SHARD_COUNT_DURATION=10ms UPDATE_STREAM_MODE_DURATION=10ms \
				REGISTER_STREAM_CONSUMER_DURATION=10ms DEREGISTER_STREAM_CONSUMER_DURATION=10ms \
				START_STREAM_ENCRYPTION_DURATION=10ms STOP_STREAM_ENCRYPTION_DURATION=10ms \
				SHARD_LIMIT=10000 ON_DEMAND_STREAM_COUNT_LIMIT=1000 \
				SHOULD_PERSIST_DATA=false LOAD_DATA_IF_EXISTS=false \
				AWS_REGION=us-east-1 AWS_ACCOUNT_ID=000000000000 \
				LOG_LEVEL="${LAMBDAADAPTER_KINESIS_LOG_LEVEL:-WARN}"
			unset INITIALIZE_STREAMS # an empty value is rejected
			exec $detach nohup node "$mods/kinesis-local/main.js" </dev/null >>"$log" 2>&1
		) &
		;;
	dynamodb)
		$detach nohup node "$pkg/dynalite.js" --host 127.0.0.1 --port "$port" \
			--createTableMs 10 --deleteTableMs 10 --updateTableMs 10 </dev/null >>"$log" 2>&1 &
		;;
	sqs)
		LAMBDAADAPTER_SQS_PORT="$port" $detach nohup node "$pkg/fauxqs.js" </dev/null >>"$log" 2>&1 &
		;;
	esac
	echo "$!" >"$state/$name.pid"
	echo "$port" >"$state/$name.port"
}

# detach runs a stand-in in a session of its own (where setsid exists), so a
# Ctrl-C in the terminal reaches the demo or test, which then stops the
# stand-ins in order, instead of killing them under it.
detach=""
if command -v setsid >/dev/null 2>&1; then
	detach=setsid
fi

stop_one() {
	local name="$1" pid
	if ! running "$name"; then
		rm -f "$state/$name.pid"
		return 1
	fi
	pid="$(pid_of "$name")"
	kill -TERM "$pid" 2>/dev/null || true
	local i
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "standins: $name (pid $pid) ignored SIGTERM for 5s; sending SIGKILL" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$state/$name.pid"
	say "stopped $name (pid $pid)"
}

cmd_start() {
	need_node
	installed || die "the stand-ins are not installed (or standins/package-lock.json changed); run: scripts/standins.sh install"
	local name port
	for name in "${services[@]}"; do
		check_port "$(port_var "$name")" "$(default_port "$name")"
	done
	kinesis_tls_port="${LAMBDAADAPTER_KINESIS_TLS_PORT:-4567}"
	check_port LAMBDAADAPTER_KINESIS_TLS_PORT "$kinesis_tls_port"
	mkdir -p "$state"
	# The state dir ignores itself, so it never shows up in git status.
	[[ -f "$state/.gitignore" ]] || printf '*\n' >"$state/.gitignore"

	# Decide everything before starting anything: a busy port fails the whole
	# start and leaves nothing half-started.
	local -a todo=() busy=()
	for name in "${services[@]}"; do
		port="$(default_port "$name")"
		if running "$name"; then
			local have
			have="$(cat "$state/$name.port" 2>/dev/null || echo "?")"
			[[ "$have" == "$port" ]] ||
				die "$name is already running (pid $(pid_of "$name")) on port $have, not $port; run: scripts/standins.sh stop"
			say "$name is already running (pid $(pid_of "$name"), port $port)"
			continue
		fi
		todo+=("$name")
		busy+=("$port")
		[[ "$name" != kinesis ]] || busy+=("$kinesis_tls_port")
	done
	if ((${#busy[@]} > 0)); then
		local out
		if ! out="$(node "$pkg/probe.js" free "${busy[@]}")"; then
			echo "$out" | sed 's/^busy \([0-9]*\) \(.*\)/standins: port \1 is taken (\2)/' >&2
			die "another process holds the port(s) above; stop it (e.g. find it with: lsof -i :PORT) or choose other ports with LAMBDAADAPTER_KINESIS_PORT, LAMBDAADAPTER_KINESIS_TLS_PORT, LAMBDAADAPTER_DYNAMODB_PORT, LAMBDAADAPTER_SQS_PORT"
		fi
	fi

	local start_ms
	start_ms="$(now_ms)"
	for name in ${todo[@]+"${todo[@]}"}; do
		launch "$name" "$(default_port "$name")"
	done

	local -a waits=()
	for name in "${services[@]}"; do
		waits+=("$name=$(default_port "$name")@$(pid_of "$name")")
	done
	local out rc=0
	out="$(node "$pkg/probe.js" wait "$timeout" "${waits[@]}")" || rc=$?
	if ((rc != 0)); then
		local line failed
		while read -r line; do
			[[ "$line" == fail\ * ]] || continue
			failed="$(cut -d' ' -f2 <<<"$line")"
			echo "standins: $failed is not ready: ${line#fail "$failed" }" >&2
			tail_log "$failed"
		done <<<"$out"
		for name in ${todo[@]+"${todo[@]}"}; do
			stop_one "$name" >/dev/null || true
		done
		die "start failed; it stopped what it had started. Logs: $state/*.log (raise LAMBDAADAPTER_STANDINS_TIMEOUT on a slow machine)"
	fi
	local ms=$(($(now_ms) - start_ms))
	for name in "${services[@]}"; do
		say "$name ready on http://127.0.0.1:$(default_port "$name") (pid $(pid_of "$name"))"
	done
	say "all ready in ${ms}ms; logs and pid files in $state"
	say "for the tests: eval \"\$(scripts/standins.sh env)\""
}

cmd_stop() {
	local name any=0
	for name in "${services[@]}"; do
		stop_one "$name" && any=1
	done
	((any)) || say "nothing was running"
}

cmd_status() {
	local name port ok=1 out
	for name in "${services[@]}"; do
		port="$(client_port "$name")"
		if running "$name"; then
			if out="$(node "$pkg/probe.js" wait 2 "$name=$port")"; then
				say "$name running (pid $(pid_of "$name")) and answering on http://127.0.0.1:$port"
			else
				say "$name running (pid $(pid_of "$name")) but NOT answering on http://127.0.0.1:$port: ${out#fail "$name" }"
				ok=0
			fi
		else
			say "$name stopped"
			ok=0
		fi
	done
	((ok))
}

cmd_env() {
	local name
	for name in "${services[@]}"; do
		check_port "$(port_var "$name")" "$(client_port "$name")"
	done
	cat <<EOF
export AWS_ENDPOINT_URL_KINESIS=http://127.0.0.1:$(client_port kinesis)
export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$(client_port dynamodb)
export AWS_ENDPOINT_URL_SQS=http://127.0.0.1:$(client_port sqs)
export AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
EOF
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
*)
	echo "usage: scripts/standins.sh install|start|stop|status|env" >&2
	exit 2
	;;
esac
