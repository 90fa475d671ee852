//go:build integration && !faultnet

package soak

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardsettle/lambdaadapter/integration/standin"
)

// TEMPORARY until soak/faultnet lands: each process reaches each stand-in
// through a plain TCP forwarder of its own, which can refuse connections or
// black-hole them; AWS error bursts cannot be injected yet (each is a
// harness error).
type directNet struct {
	t   *testing.T
	env *standin.Env

	mu  sync.Mutex
	fwd map[string]*forwarder
}

func newNetLayer(t *testing.T, env *standin.Env) netLayer {
	d := &directNet{t: t, env: env, fwd: map[string]*forwarder{}}
	t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, f := range d.fwd {
			f.close()
		}
	})
	return d
}

var errNoFaultLayer = errors.New("no AWS fault layer (soak/faultnet) yet")

func (d *directNet) route(proc string, svc service) (string, error) {
	up := d.env.SQSEndpoint
	switch svc {
	case svcKinesis:
		up = d.env.KinesisEndpoint
	case svcDynamoDB:
		up = d.env.DynamoDBEndpoint
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if f := d.fwd[proc+"/"+string(svc)]; f != nil {
		return "http://" + f.l.Addr().String(), nil
	}
	f, err := newForwarder(strings.TrimPrefix(up, "http://"))
	if err != nil {
		return "", err
	}
	d.fwd[proc+"/"+string(svc)] = f
	return "http://" + f.l.Addr().String(), nil
}

func (d *directNet) cut(proc string, svc service, blackHole bool) (func(), error) {
	d.mu.Lock()
	f := d.fwd[proc+"/"+string(svc)]
	d.mu.Unlock()
	if f == nil {
		return nil, errors.New("no route")
	}
	mode := modeRefuse
	if blackHole {
		mode = modeBlackHole
	}
	f.set(mode)
	return func() { f.set(modePass) }, nil
}

func (d *directNet) burst(service, Event) (func(), error) { return nil, errNoFaultLayer }

const (
	modePass int32 = iota
	modeRefuse
	modeBlackHole
)

type forwarder struct {
	l    net.Listener
	up   string
	mode atomic.Int32

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newForwarder(up string) (*forwarder, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &forwarder{l: l, up: up, conns: map[net.Conn]bool{}}
	f.wg.Go(f.accept)
	return f, nil
}

func (f *forwarder) set(m int32) {
	f.mode.Store(m)
	if m == modeRefuse {
		f.mu.Lock()
		for c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
	}
}

func (f *forwarder) track(c net.Conn, add bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if add {
		f.conns[c] = true
	} else {
		delete(f.conns, c)
	}
}

func (f *forwarder) accept() {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		if f.mode.Load() == modeRefuse {
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", f.up)
		if err != nil {
			c.Close()
			continue
		}
		f.track(c, true)
		f.track(u, true)
		f.wg.Go(func() { f.pipe(u, c) })
		f.wg.Go(func() { f.pipe(c, u) })
	}
}

// pipe copies src to dst; while black-holed, what it reads is dropped.
func (f *forwarder) pipe(dst, src net.Conn) {
	defer func() {
		dst.Close()
		src.Close()
		f.track(dst, false)
		f.track(src, false)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && f.mode.Load() != modeBlackHole {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

func (f *forwarder) close() {
	f.l.Close()
	f.set(modeRefuse)
	f.wg.Wait()
}
