//go:build integration

package soak

import (
	"errors"
	"testing"

	"github.com/shardsettle/lambdaadapter/integration/standin"
)

// TEMPORARY until soak/faultnet lands: every process reaches the stand-ins
// directly and no network fault can be injected (each is a harness error).
type directNet struct{ env *standin.Env }

func newNetLayer(t *testing.T, env *standin.Env) netLayer { return &directNet{env} }

var errNoFaultLayer = errors.New("no fault layer (soak/faultnet) yet")

func (d *directNet) route(proc string, svc service) (string, error) {
	switch svc {
	case svcKinesis:
		return d.env.KinesisEndpoint, nil
	case svcDynamoDB:
		return d.env.DynamoDBEndpoint, nil
	}
	return d.env.SQSEndpoint, nil
}

func (d *directNet) cut(string, service, bool) (func(), error) { return nil, errNoFaultLayer }
func (d *directNet) burst(service, Event) (func(), error)      { return nil, errNoFaultLayer }
