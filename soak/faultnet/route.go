package faultnet

import (
	"errors"
	"fmt"
)

// Route is one client's path to one stand-in: client → TCP (toxiproxy) →
// AWS (errors shaped as AWS's) → stand-in. Give each worker its own Route
// per service, so that one worker can lose DynamoDB while the others keep
// it. Its fields are set by NewRoute and must not be changed.
type Route struct {
	// Service is the service of the stand-in.
	Service Service
	// TCP is the route's TCP layer, the one the client connects to.
	TCP *TCP
	// AWS is the route's AWS layer, between TCP and the stand-in.
	AWS *AWS
}

// NewRoute starts the two layers of a route to the stand-in of svc at
// upstream (an http:// URL).
func NewRoute(svc Service, upstream string) (*Route, error) {
	a, err := NewAWS(svc, upstream)
	if err != nil {
		return nil, err
	}
	t, err := NewTCP(fmt.Sprintf("%s-%s", svc, a.ln.Addr()), a.URL())
	if err != nil {
		return nil, errors.Join(err, a.Close())
	}
	return &Route{Service: svc, TCP: t, AWS: a}, nil
}

// URL returns the TCP layer's address, http://127.0.0.1:port: what the
// client uses (o.BaseEndpoint), or a child process in AWS_ENDPOINT_URL_*.
func (r *Route) URL() string { return r.TCP.URL() }

// Close closes the TCP layer, then the AWS layer. It is idempotent.
func (r *Route) Close() error {
	return errors.Join(r.TCP.Close(), r.AWS.Close())
}
