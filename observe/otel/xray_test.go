package otel

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestParseXRay(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("5759e988bd862e3fe1be46a994272793")
	sid, _ := trace.SpanIDFromHex("53995c3f42cd8ad8")
	for _, c := range []struct {
		name, header string
		ok, sampled  bool
	}{
		{"sampled", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", true, true},
		{"not sampled", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0", true, false},
		{"deferred", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=?", true, false},
		{"any order, lineage, spaces", "Lineage=a87bd80c:1|68fd508a:5; Parent=53995c3f42cd8ad8; Sampled=1; Root=1-5759e988-bd862e3fe1be46a994272793", true, true},
		{"no parent", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", false, false},
		{"no root", "Parent=53995c3f42cd8ad8;Sampled=1", false, false},
		{"version 2", "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, false},
		{"short root", "Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8", false, false},
		{"not hex", "Root=1-5759e98g-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, false},
		{"short parent", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad", false, false},
		{"zero parent", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=0000000000000000", false, false},
		{"empty", "", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc, ok := parseXRay(c.header)
			if ok != c.ok {
				t.Fatalf("ok %v, want %v", ok, c.ok)
			}
			if !ok {
				return
			}
			if sc.TraceID() != tid || sc.SpanID() != sid || sc.IsSampled() != c.sampled || !sc.IsRemote() {
				t.Errorf("span context %s/%s sampled %v remote %v, want %s/%s sampled %v remote",
					sc.TraceID(), sc.SpanID(), sc.IsSampled(), sc.IsRemote(), tid, sid, c.sampled)
			}
		})
	}
}

// TestXRayFromContext: the header comes from aws-lambda-go's context key,
// never from the environment.
func TestXRayFromContext(t *testing.T) {
	t.Setenv("_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	if _, ok := xrayFromContext(t.Context()); ok {
		t.Errorf("a trace from a context without the header")
	}
	ctx := context.WithValue(t.Context(), "x-amzn-trace-id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8") //nolint:staticcheck // aws-lambda-go's own key
	if sc, ok := xrayFromContext(ctx); !ok || sc.TraceID().String() != "5759e988bd862e3fe1be46a994272793" {
		t.Errorf("trace %v, %v from the context's header", sc, ok)
	}
}
