package lambdaadapter_test

import (
	"testing"

	"github.com/shardsettle/lambdaadapter/internal/conformance"
)

// TestConformanceLambda and TestConformanceECS run the one suite of outcome
// semantics (internal/conformance: every row of the semantics table) through
// each mode, end to end through the public doors (NewFunction, NewService), with messages the
// handler may keep (the default) and with WithRecycledMessages.
func TestConformanceLambda(t *testing.T) {
	conformance.Run(t, conformance.Lambda{}, conformance.Cases())
}

func TestConformanceLambdaRecycled(t *testing.T) {
	conformance.Run(t, conformance.Lambda{Recycle: true}, conformance.Cases())
}

func TestConformanceECS(t *testing.T) {
	conformance.Run(t, conformance.ECS{}, conformance.Cases())
}

func TestConformanceECSRecycled(t *testing.T) {
	conformance.Run(t, conformance.ECS{Recycle: true}, conformance.Cases())
}
