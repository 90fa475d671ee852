//go:build integration

package soak

import (
	"fmt"
	"hash/fnv"
	"sync"
	"testing"

	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// faultNet is the soak's network: every process reaches each stand-in
// through a faultnet.Route of its own (client → TCP proxy → AWS-error proxy
// → stand-in), so one process can be cut off from one service while the
// others keep it, and AWS error bursts hit every route of a service.
type faultNet struct {
	t    *testing.T
	env  *standin.Env
	seed uint64

	mu     sync.Mutex
	routes map[string]*faultnet.Route // by proc/service
	active map[*burst]bool
}

// burst is an AWS error burst in force: its rule, and how to remove it
// from each route it was put on.
type burst struct {
	svc     service
	rule    faultnet.Rule
	removes []func()
}

func newNetLayer(t *testing.T, env *standin.Env) netLayer {
	n := &faultNet{t: t, env: env, seed: *flagSeed, routes: map[string]*faultnet.Route{}, active: map[*burst]bool{}}
	t.Cleanup(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for name, r := range n.routes {
			if err := r.Close(); err != nil {
				t.Errorf("soak: close route %s: %v", name, err)
			}
		}
	})
	return n
}

func (n *faultNet) upstream(svc service) string {
	switch svc {
	case svcKinesis:
		return n.env.KinesisEndpoint
	case svcDynamoDB:
		return n.env.DynamoDBEndpoint
	}
	return n.env.SQSEndpoint
}

func (n *faultNet) route(proc string, svc service) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name := proc + "/" + string(svc)
	if r := n.routes[name]; r != nil {
		return r.URL(), nil
	}
	r, err := faultnet.NewRoute(faultnet.Service(svc), n.upstream(svc))
	if err != nil {
		return "", err
	}
	// Each route draws its Rate from a rand of its own, seeded from the
	// run's seed and its name.
	h := fnv.New64a()
	fmt.Fprint(h, name)
	r.AWS.SetSeed(int64(n.seed ^ h.Sum64()))
	n.routes[name] = r
	for b := range n.active {
		if b.svc == svc {
			b.removes = append(b.removes, r.AWS.Inject(b.rule))
		}
	}
	return r.URL(), nil
}

func (n *faultNet) cut(proc string, svc service, blackHole bool) (func(), error) {
	n.mu.Lock()
	r := n.routes[proc+"/"+string(svc)]
	n.mu.Unlock()
	if r == nil {
		return nil, fmt.Errorf("no route of %s to %s", proc, svc)
	}
	if blackHole {
		return r.TCP.BlackHole(), nil
	}
	return r.TCP.Cut(), nil
}

func (n *faultNet) burst(svc service, e Event) (func(), error) {
	f, err := awsFault(svc, e.Fault)
	if err != nil {
		return nil, err
	}
	b := &burst{svc: svc, rule: faultnet.Rule{Ops: e.Ops, Fault: f, Rate: e.Rate}}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range n.routes {
		if r.Service == faultnet.Service(svc) {
			b.removes = append(b.removes, r.AWS.Inject(b.rule))
		}
	}
	n.active[b] = true
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.active, b)
		for _, rm := range b.removes {
			rm()
		}
	}, nil
}

// awsFault returns the faultnet fault a schedule names (see schedule.go).
func awsFault(svc service, name string) (faultnet.Fault, error) {
	switch name {
	case "Throttled":
		return faultnet.Throttled(), nil
	case "LimitExceeded":
		return faultnet.LimitExceeded(), nil
	case "ExpiredIterator":
		return faultnet.ExpiredIterator(), nil
	case "KMSThrottling":
		return faultnet.KMSThrottling(), nil
	case "InternalFailure":
		return faultnet.InternalFailure(), nil
	case "ServiceUnavailable":
		return faultnet.ServiceUnavailable(), nil
	case "ThrottlingException":
		return faultnet.ThrottlingException(), nil
	case "RequestLimitExceeded":
		return faultnet.RequestLimitExceeded(), nil
	case "SQSThrottled":
		return faultnet.SQSThrottled(), nil
	case "CutBody":
		return faultnet.CutBody(), nil
	case "LostResponse":
		return faultnet.LostResponse(), nil
	case "PartialFailure":
		code := "ProvisionedThroughputExceededException"
		if svc == svcSQS {
			code = "InternalError"
		}
		return faultnet.PartialFailure(2, code), nil
	}
	var none faultnet.Fault
	return none, fmt.Errorf("no faultnet fault %q", name)
}

// directNet is the network of a run without network faults (the scale
// soak): every process reaches the stand-ins straight, as the environment
// points at them; cut and burst are not supported.
type directNet struct{ env *standin.Env }

func (n directNet) route(_ string, svc service) (string, error) {
	switch svc {
	case svcKinesis:
		return n.env.KinesisEndpoint, nil
	case svcDynamoDB:
		return n.env.DynamoDBEndpoint, nil
	}
	return n.env.SQSEndpoint, nil
}

func (directNet) cut(string, service, bool) (func(), error) {
	return nil, fmt.Errorf("soak: no network faults on the direct network")
}

func (directNet) burst(service, Event) (func(), error) {
	return nil, fmt.Errorf("soak: no network faults on the direct network")
}
