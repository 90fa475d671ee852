package otel

import (
	"context"
	"encoding/hex"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// xrayContextKey is the context key under which aws-lambda-go
// (lambda.Start) stores each invocation's Lambda-Runtime-Trace-Id header:
// a plain string key, set for every invocation. The _X_AMZN_TRACE_ID
// environment variable holds the same value only while the process serves
// one invocation at a time, so it is never read.
const xrayContextKey = "x-amzn-trace-id"

// xrayFromContext returns the span context of the X-Ray trace header that
// aws-lambda-go put in ctx, if there is a valid one.
func xrayFromContext(ctx context.Context) (trace.SpanContext, bool) {
	h, _ := ctx.Value(xrayContextKey).(string)
	if h == "" {
		return trace.SpanContext{}, false
	}
	return parseXRay(h)
}

// parseXRay converts an X-Ray trace header
// (Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1)
// to a remote span context: the W3C trace id is the Root's epoch and
// unique id run together (5759e988bd862e3fe1be46a994272793), the span id
// is Parent, and Sampled=1 sets the sampled flag (0 and "?", a deferred
// decision, do not). ok is false when Root or Parent is missing or
// malformed. Other fields (Lineage, Self) are ignored.
func parseXRay(h string) (sc trace.SpanContext, ok bool) {
	var cfg trace.SpanContextConfig
	var root, parent bool
	for part := range strings.SplitSeq(h, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case strings.EqualFold(k, "Root"):
			// 1-XXXXXXXX-YYYYYYYYYYYYYYYYYYYYYYYY: version 1, 8 hex digits
			// of epoch seconds, 24 of unique id.
			if len(v) != 35 || v[0] != '1' || v[1] != '-' || v[10] != '-' {
				return trace.SpanContext{}, false
			}
			if _, err := hex.Decode(cfg.TraceID[:4], []byte(v[2:10])); err != nil {
				return trace.SpanContext{}, false
			}
			if _, err := hex.Decode(cfg.TraceID[4:], []byte(v[11:])); err != nil {
				return trace.SpanContext{}, false
			}
			root = true
		case strings.EqualFold(k, "Parent"):
			if len(v) != 16 {
				return trace.SpanContext{}, false
			}
			if _, err := hex.Decode(cfg.SpanID[:], []byte(v)); err != nil {
				return trace.SpanContext{}, false
			}
			parent = true
		case strings.EqualFold(k, "Sampled"):
			if v == "1" {
				cfg.TraceFlags = trace.FlagsSampled
			}
		}
	}
	if !root || !parent {
		return trace.SpanContext{}, false
	}
	cfg.Remote = true
	sc = trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}
