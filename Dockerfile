# syntax=docker/dockerfile:1
#
# Container image of cmd/bootstrap for the long-running mode (template.yaml,
# Mode=ecs): a static binary on distroless, run as a non-root user, started as
# `bootstrap -mode=ecs`.
#
#   docker buildx build --platform linux/arm64 -t lambdaadapter .
#   docker buildx build --platform linux/arm64 \
#     -t ACCOUNT.dkr.ecr.REGION.amazonaws.com/lambdaadapter:v1 --push .
#
# The builder runs on the build machine's own platform and cross-compiles for
# the target's (TARGETOS/TARGETARCH, set by buildx from --platform), so an arm64
# image builds quickly on an amd64 machine. The Fargate task's Architecture
# parameter must match the image's platform.
#
# Configuration is the LAMBDAADAPTER_* environment (see cmd/bootstrap and
# template.yaml); AWS credentials come from the ECS task role. SIGTERM stops it
# gracefully (checkpoints written, leases released): give the container a stop
# timeout longer than twice LAMBDAADAPTER_SHUTDOWN_TIMEOUT (template.yaml: 120 s).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
# CGO_ENABLED=0: a static binary that needs no libc (distroless/static has
# none). lambda.norpc: leave out aws-lambda-go's RPC mode, which only the
# retired go1.x runtime used.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -tags lambda.norpc -trimpath -ldflags="-s -w" -o /out/bootstrap ./cmd/bootstrap

# distroless/static: CA certificates (for the AWS endpoints) and time zone data,
# no shell, no package manager; :nonroot runs as uid 65532.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/bootstrap /bootstrap
USER nonroot:nonroot
ENTRYPOINT ["/bootstrap", "-mode=ecs"]
