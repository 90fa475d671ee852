package faultnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// restartFor bounds how long Cut's restore and ResetPeer try to listen on
// the proxy's port again.
const restartFor = 5 * time.Second

// TCP is a toxiproxy proxy, run in process by toxiproxy's Go library (no
// daemon), on 127.0.0.1 in front of one address. With no fault it passes
// bytes through unchanged. Each fault method adds a toxic and returns a
// function that removes it; calling that again does nothing.
//
// A TCP is safe for concurrent use. toxiproxy runs goroutines per
// connection that the library gives no handle to wait for: they end when
// their connections close, which Close causes.
type TCP struct {
	name     string
	upstream string
	proxy    *toxiproxy.Proxy

	mu     sync.Mutex
	seq    int   // names toxics uniquely
	cuts   int   // Cut calls not yet restored
	closed bool  //
	err    error // the first failure to listen again, returned by Close
}

// NewTCP starts a proxy named name (for its toxics' names and errors) on a
// free port of 127.0.0.1, in front of upstream: "host:port", or an http://
// URL whose host and port are used.
func NewTCP(name, upstream string) (*TCP, error) {
	addr, err := tcpAddr(upstream)
	if err != nil {
		return nil, fmt.Errorf("faultnet: tcp %s: %w", name, err)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, name, "127.0.0.1:0", addr)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("faultnet: tcp %s: start: %w", name, err)
	}
	return &TCP{name: name, upstream: addr, proxy: p}, nil
}

// tcpAddr returns the host:port of upstream.
func tcpAddr(upstream string) (string, error) {
	if !strings.Contains(upstream, "://") {
		if _, _, err := net.SplitHostPort(upstream); err != nil {
			return "", fmt.Errorf("upstream %q: %w", upstream, err)
		}
		return upstream, nil
	}
	u, err := url.Parse(upstream)
	if err != nil {
		return "", fmt.Errorf("upstream %q: %w", upstream, err)
	}
	if u.Port() == "" {
		return "", fmt.Errorf("upstream %q: want an explicit port", upstream)
	}
	return u.Host, nil
}

// URL returns the proxy's address as http://127.0.0.1:port.
func (t *TCP) URL() string { return "http://" + t.Addr() }

// Addr returns the proxy's address, 127.0.0.1:port.
func (t *TCP) Addr() string {
	t.proxy.Lock()
	defer t.proxy.Unlock()
	return t.proxy.Listen
}

// Latency delays the data of every connection toward the client (the
// answers) by latency, plus or minus up to jitter drawn per chunk (toxiproxy's
// latency toxic, whole milliseconds). A call's answer thus comes at least
// latency-jitter later.
func (t *TCP) Latency(latency, jitter time.Duration) (remove func()) {
	return t.toxics(map[string]any{"latency": latency.Milliseconds(), "jitter": jitter.Milliseconds()}, "latency", "downstream")
}

// Bandwidth limits every connection to kbPerSecond KB/s in each direction
// (toxiproxy's bandwidth toxic).
func (t *TCP) Bandwidth(kbPerSecond int64) (remove func()) {
	return t.toxics(map[string]any{"rate": kbPerSecond}, "bandwidth", "upstream", "downstream")
}

// ResetPeer resets connections (TCP RST) when their answer begins:
// toxiproxy's reset_peer toxic on the direction toward the client drops the
// answer's first bytes, waits after, and closes the connection with
// SO_LINGER 0. The request has reached the upstream by then, so its effect
// happened. toxiproxy sets SO_LINGER only on connections it opens while the
// toxic is there, so ResetPeer closes the connections already open (the
// proxy stops and listens again on its port): a call in flight on one sees
// it closed (EOF) instead of reset.
func (t *TCP) ResetPeer(after time.Duration) (remove func()) {
	remove = t.toxics(map[string]any{"timeout": after.Milliseconds()}, "reset_peer", "downstream")
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cuts == 0 && !t.closed {
		t.proxy.Stop()
		t.restartLocked()
	}
	return remove
}

// BlackHole drops the data of every connection in both directions and holds
// the connections open (toxiproxy's timeout toxic with timeout 0): calls
// time out on the client's deadline, and nothing reaches the upstream.
// Removing it closes the connections it held.
func (t *TCP) BlackHole() (remove func()) {
	return t.toxics(map[string]any{"timeout": 0}, "timeout", "upstream", "downstream")
}

// Cut disables the proxy: it stops listening, so connections are refused,
// and closes the connections it has. restore listens on the same port
// again; with nested cuts, the last restore does. Calling restore again
// does nothing. Should the port not be free again within a few seconds,
// the proxy stays down and Close returns the error.
func (t *TCP) Cut() (restore func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return func() {}
	}
	t.cuts++
	if t.cuts == 1 {
		t.proxy.Stop()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.cuts--
			if t.cuts == 0 && !t.closed {
				t.restartLocked()
			}
		})
	}
}

// Close removes every toxic and stops the proxy, closing its connections.
// It is idempotent. It returns the error of a failed restore or ResetPeer,
// if one failed to listen again.
func (t *TCP) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return t.err
	}
	t.closed = true
	t.proxy.Toxics.ResetToxics(context.Background())
	t.proxy.Stop()
	return t.err
}

// restartLocked listens on the proxy's port again, retrying for a while if
// the port is briefly taken.
func (t *TCP) restartLocked() {
	deadline := time.Now().Add(restartFor)
	for {
		err := t.proxy.Start()
		if err == nil || errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return
		}
		if time.Now().After(deadline) {
			if t.err == nil {
				t.err = fmt.Errorf("faultnet: tcp %s: listen again on %s: %w", t.name, t.proxy.Listen, err)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// toxics adds one toxic of type typ with attributes attrs on each stream
// ("upstream": toward the upstream, "downstream": toward the client) and
// returns the function that removes them.
func (t *TCP) toxics(attrs map[string]any, typ string, streams ...string) (remove func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return func() {}
	}
	var names []string
	for _, stream := range streams {
		t.seq++
		name := fmt.Sprintf("%s_%s_%d", typ, stream, t.seq)
		spec, _ := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs})
		if _, err := t.proxy.Toxics.AddToxicJson(strings.NewReader(string(spec))); err != nil {
			// Only a malformed spec fails here, which the methods above never build.
			if t.err == nil {
				t.err = fmt.Errorf("faultnet: tcp %s: add %s toxic: %w", t.name, typ, err)
			}
			continue
		}
		names = append(names, name)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.closed {
				return
			}
			for _, name := range names {
				_ = t.proxy.Toxics.RemoveToxic(context.Background(), name) // gone already: nothing to do
			}
		})
	}
}
