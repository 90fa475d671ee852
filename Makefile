# lambdaadapter — the two commands a new user types:
#   make demo   both modes end to end on local stand-ins (Lambda under the Runtime Interface Emulator, ECS workers)
#   make test   vet, unit tests with the race detector, end-to-end tests
SHELL := /bin/bash
GO    ?= go

.PHONY: all build build-AdapterFunction tools standins test unit integration soak soak-regressions soak-scale bench bench-e2e bench-lanes bench-scale charts fuzz test-arm64 demo api clean

all: build test

build:
	$(GO) build ./...
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -tags lambda.norpc -o bin/bootstrap ./cmd/bootstrap

# sam build (template.yaml: BuildMethod makefile, CodeUri .) runs this in a copy of
# the repository with ARTIFACTS_DIR set. SAM does not pass the function's
# architecture: arm64 unless LAMBDA_GOARCH=amd64 (for Architecture=x86_64).
LAMBDA_GOARCH ?= arm64
build-AdapterFunction:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_GOARCH) $(GO) build -buildvcs=auto -tags lambda.norpc -trimpath -o "$(ARTIFACTS_DIR)/bootstrap" ./cmd/bootstrap

# Pinned local stand-ins (the Lambda Runtime Interface Emulator, from tools/go.mod).
tools:
	scripts/install-rie.sh

unit:
	$(GO) vet ./...
	# At most 350 exported names (issue 29): the API is what users depend on.
	$(GO) run ./scripts/apisurface -max 350
	# The product builds on every platform Go users develop on, not only Linux. The
	# harnesses (integration/, bench/scalesim) are modules of their own, checked below.
	GOOS=darwin $(GO) build ./... && GOOS=windows $(GO) build ./...
	$(GO) test -race -count=1 ./...
	# The allocation pins skip under the race detector; they run here without it.
	$(GO) test -count=1 -run 'Alloc' . ./internal/settle/ ./envelope/ ./internal/publish/ ./internal/event/ ./internal/getrecords/ ./observe/emf/
	cd bench/e2e && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	cd bench/scalesim && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	cd bench/charts && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd integration && $(GO) vet ./... && $(GO) vet -tags integration ./... && $(GO) test -race -count=1 ./...
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd observe/otel && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	cd soak && $(GO) vet ./... && $(GO) vet -tags integration ./... && $(GO) test -race -count=1 ./...

# Starts the pinned local stand-ins (Kinesis, DynamoDB, SQS; standins/package-lock.json),
# runs the end-to-end tests (the module integration/) against them and the Lambda
# Runtime Interface Emulator, then the fault soak's fixed-seed run (45 s of faults,
# about 65-80 s in all) on the same stand-ins, and stops the stand-ins again, also
# when a test fails.
integration: tools standins
	scripts/standins.sh start
	eval "$$(scripts/standins.sh env)" && (cd integration && $(GO) test -tags integration -count=1 -v ./...) && \
	  (cd soak && $(GO) test -tags integration -count=1 -run Standin ./faultnet/... && \
	    $(GO) test -tags integration -count=1 -timeout 10m ./faultcases/... && \
	    LAMBDAADAPTER_SOAK_STANDINS=running $(GO) test -tags integration -count=1 -run '^TestSoak$$' -v .); \
	  rc=$$?; scripts/standins.sh stop; exit $$rc

# The seeded fault soak (the module soak/): bootstrap -mode=ecs workers and the
# bootstrap under the RIE through a fault layer, with kills, pauses, partitions,
# AWS errors, reshards and a downstream outage drawn from SEED over DURATION, then
# the checker's table by fault kind. It starts its own stand-ins (on free ports, or
# on LAMBDAADAPTER_*_PORT) and fails when a promise is broken. OUT=dir keeps the
# logs, schedule, report and run.json there (default: a temporary directory, kept
# only when the run fails).
SEED ?= 1
DURATION ?= 10m
soak: tools standins
	cd soak && $(GO) test -tags integration -count=1 -run '^TestSoak$$' -v -timeout 0 . -soak.seed=$(SEED) -soak.duration=$(DURATION) $(if $(OUT),-soak.out=$(abspath $(OUT)))

# Every seed that once found a bug (soak/soak_integration_test.go: regressionSeeds).
soak-regressions: tools standins
	cd soak && $(GO) test -tags integration -count=1 -run '^TestSoakRegressions$$' -v -timeout 0 . -soak.regressions

# The scale soak (issue 30; soak/scale_integration_test.go): bootstrap -mode=ecs
# workers on 8 shards, 2 of them hot, scaled 3 -> 6 -> 2 (4 stopped with SIGTERM)
# under a steady load with a CPU cost per byte; per phase, once the lease table
# converged, each worker's CPU utilization and leases, then the checker (0 lost,
# 0 handled twice). About 3 minutes (2m15s-3m on 2 CPUs). The report goes to SCALE_REPORT (commit it):
# by default the first of benchmarks/scale-soak-DATE.txt, -DATEb.txt, -DATEc.txt ... -DATEz.txt not there yet, then
# -DATE-HHMMSS.txt, so that a second run on a day keeps the first's report. OUT=dir keeps the logs.
SCALE_REPORT ?= $(shell d=benchmarks/scale-soak-$$(date -u +%Y-%m-%d); f=$$d.txt; for s in b c d e f g h i j k l m n o p q r s t u v w x y z; do [ -e $$f ] || break; f=$$d$$s.txt; done; [ -e $$f ] && f=$$d-$$(date -u +%H%M%S).txt; echo $$f)
soak-scale: standins
	cd soak && $(GO) test -tags integration -count=1 -run '^TestScaleSoak$$' -v -timeout 30m . -scale -scale.report=$(abspath $(SCALE_REPORT)) $(if $(OUT),-soak.out=$(abspath $(OUT)))

standins:
	scripts/standins.sh install

test: unit integration

# Micro and end-to-end benchmarks recorded in BENCHMARKS.md.
bench:
	$(GO) test -run '^$$' -bench 'BenchmarkCoreToCore|BenchmarkInvoke|BenchmarkCopies' -benchmem -count=1 .
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./envelope/ ./internal/settle/ ./internal/event/ ./internal/getrecords/
	$(GO) test -run '^$$' -bench '^BenchmarkPipeline$$' -benchtime=4x -count=1 ./internal/consumer/
	$(GO) test -run '^$$' -bench '^BenchmarkRegister$$' -benchmem -count=1 ./internal/consumer/
	$(GO) test -run '^$$' -bench . -count=1 ./internal/base64/
	$(MAKE) bench-lanes

# Long-running mode end to end against its own stand-ins (about 20–25 minutes;
# scripts/bench-e2e.sh -records 20000 for a 6–10 minute run);
# the benchmark is the separate module bench/e2e.
bench-e2e:
	scripts/bench-e2e.sh

bench-lanes:
	$(GO) test -run '^$$' -bench 'BenchmarkLanes' -benchtime=1x -count=1 .

# The scale simulation (the module bench/scalesim): 1,000 shards, 50 workers joining, leaving
# and dying while records are written, on the real consumer and lease code. First in
# virtual time with the default durations (seconds), then in real time with 3 s leases
# (minutes). Prints a table per run. The real-time run with the default 10 s leases:
#   cd bench/scalesim && go test -run '^$' -bench '^BenchmarkFleet$' -benchtime=1x -timeout 60m . -scalesim.lease=10s
# The skewed fleet with its shards dealt over 4 streams, each worker reading them as one group:
#   cd bench/scalesim && go test -run '^TestSkewedFullFleetVirtual$' -count=1 -timeout 90m -v . -scalesim.full -scalesim.streams=4
# The skewed fleet through the end of a rolling deployment from a version before the leader (one
# worker of it at the start; a replacement joins, it stops; then the usual changes):
#   cd bench/scalesim && go test -run '^TestSkewedFullFleetVirtual$' -count=1 -timeout 90m -v . -scalesim.full -scalesim.older=1
bench-scale:
	cd bench/scalesim && $(GO) test -run '^TestFullFleetVirtual$$' -count=1 -timeout 30m -v . -scalesim.full
	cd bench/scalesim && $(GO) test -run '^TestSkewedFullFleetVirtual$$' -count=1 -timeout 60m -v . -scalesim.full
	cd bench/scalesim && $(GO) test -run '^$$' -bench '^BenchmarkFleet$$' -benchtime=1x -count=1 -timeout 60m .

# The charts in BENCHMARKS.md (benchmarks/charts/*.png), drawn from the raw
# output in benchmarks/ by the module bench/charts; it names the files it draws.
charts:
	cd bench/charts && $(GO) run . -in ../../benchmarks -out ../../benchmarks/charts

# A short run of every fuzz target (crashers land in testdata/fuzz).
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 30s ./envelope/
	$(GO) test -run '^$$' -fuzz '^FuzzRoundTrip$$' -fuzztime 30s ./envelope/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeKinesis$$' -fuzztime 30s ./internal/event/
	$(GO) test -run '^$$' -fuzz '^FuzzFastPaths$$' -fuzztime 30s ./internal/event/
	$(GO) test -run '^$$' -fuzz '^FuzzTemplates$$' -fuzztime 30s ./internal/event/
	$(GO) test -run '^$$' -fuzz '^FuzzSplit$$' -fuzztime 30s ./internal/event/
	$(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime 30s ./internal/message/
	$(GO) test -run '^$$' -fuzz '^FuzzCompareSequence$$' -fuzztime 30s ./internal/settle/
	$(GO) test -run '^$$' -fuzz '^FuzzDeaggregate$$' -fuzztime 30s ./internal/kpl/
	$(GO) test -run '^$$' -fuzz '^FuzzGetRecordsDecode$$' -fuzztime 30s ./internal/getrecords/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 30s ./internal/base64/

# The decoders' tests on arm64 (the default Lambda architecture), where the base64
# decoder takes its NEON path, under user-mode QEMU (Debian: apt-get install qemu-user).
ARM64_PKGS = internal/base64 internal/event internal/getrecords
test-arm64:
	@command -v qemu-aarch64 >/dev/null || { echo "test-arm64: qemu-aarch64 not found; install it (Debian: apt-get install qemu-user)" >&2; exit 1; }
	@mkdir -p bin
	@set -e; for p in $(ARM64_PKGS); do \
		GOARCH=arm64 $(GO) test -c -o bin/arm64-$$(basename $$p).test ./$$p; \
		(cd $$p && qemu-aarch64 ../../bin/arm64-$$(basename $$p).test -test.run . -test.count 1) || exit 1; \
		echo "ok arm64 $$p"; \
	done

# The exported names the module offers its users, per package (scripts/apisurface).
api:
	$(GO) run ./scripts/apisurface -max 350

# Everything end to end on local stand-ins (installs and stops them itself).
demo:
	scripts/demo.sh

clean:
	rm -rf bin
