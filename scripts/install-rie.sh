#!/usr/bin/env bash
# install-rie.sh builds the AWS Lambda Runtime Interface Emulator (RIE) pinned
# in tools/go.mod into bin/aws-lambda-rie, for the integration tests
# (cd integration && go test -tags integration ./...).
#
# It is idempotent: when bin/aws-lambda-rie already holds the pinned version it
# does nothing. It works from any directory. Override the output path with
# LAMBDAADAPTER_RIE (the integration tests read the same variable).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${LAMBDAADAPTER_RIE:-$root/bin/aws-lambda-rie}"
[[ "$out" == /* ]] || out="$PWD/$out" # relative to where the script was run
pkg="github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
mod="github.com/aws/aws-lambda-runtime-interface-emulator"

cd "$root/tools"
want="$(go list -m -f '{{.Version}}' "$mod")"

if [[ -x "$out" ]]; then
	have="$(go version -m "$out" 2>/dev/null | awk -v m="$mod" '$1 == "mod" && $2 == m { print $3 }')"
	if [[ "$have" == "$want" ]]; then
		echo "install-rie: $out is already $mod@$want; nothing to do"
		exit 0
	fi
	echo "install-rie: $out is ${have:-of unknown version}, want $want; rebuilding"
fi

mkdir -p "$(dirname "$out")"
echo "install-rie: building $pkg@$want (pinned in tools/go.mod) into $out"
CGO_ENABLED=0 go build -o "$out" "$pkg"
echo "install-rie: done: $(go version -m "$out" | awk -v m="$mod" '$1 == "mod" && $2 == m { print $2 "@" $3 }')"
