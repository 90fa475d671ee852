package faultnet_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shardsettle/lambdaadapter/soak/faultnet"
)

// newTCP starts a TCP layer in front of upstream, closed when the test ends.
func newTCP(t testing.TB, upstream string) *faultnet.TCP {
	t.Helper()
	p, err := faultnet.NewTCP(t.Name(), upstream)
	if err != nil {
		t.Fatalf("NewTCP: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("TCP.Close: %v", err)
		}
	})
	return p
}

// post sends one POST of op to url on a new connection (a fresh transport,
// closed afterwards) and returns the answer's body.
func post(ctx context.Context, url, op string) ([]byte, error) {
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/", strings.NewReader(`{}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Amz-Target", "Test."+op)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// bigAnswer makes the fake answer op with n bytes.
func bigAnswer(f *fake, op string, n int) {
	body := []byte(strings.Repeat("x", n))
	f.setAnswer(op, func(w http.ResponseWriter, _ []byte) { _, _ = w.Write(body) })
}

func TestTCPPassThrough(t *testing.T) {
	up := newFake(t)
	bigAnswer(up, "Big", 1<<20)
	for _, addr := range []string{up.URL(), strings.TrimPrefix(up.URL(), "http://")} {
		p := newTCP(t, addr)
		body, err := post(t.Context(), p.URL(), "Big")
		if err != nil || len(body) != 1<<20 {
			t.Errorf("through %s: %d bytes, %v; want 1 MiB", addr, len(body), err)
		}
	}
}

// TestTCPLatency: every answer comes at least the latency later; removed,
// the latency is gone (the test only checks that calls work again: speed is
// not something a unit test may assert).
func TestTCPLatency(t *testing.T) {
	up := newFake(t)
	p := newTCP(t, up.URL())
	const latency = 400 * time.Millisecond
	remove := p.Latency(latency, 100*time.Millisecond)
	start := time.Now()
	if _, err := post(t.Context(), p.URL(), "X"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < latency-100*time.Millisecond {
		t.Errorf("call took %v, want at least %v", took, latency-100*time.Millisecond)
	}
	remove()
	remove()
	if _, err := post(t.Context(), p.URL(), "X"); err != nil {
		t.Errorf("after remove: %v", err)
	}
}

// TestTCPBandwidth: 64 KiB at 32 KB/s take at least about two seconds.
func TestTCPBandwidth(t *testing.T) {
	up := newFake(t)
	bigAnswer(up, "Big", 64<<10)
	p := newTCP(t, up.URL())
	remove := p.Bandwidth(32)
	defer remove()
	start := time.Now()
	body, err := post(t.Context(), p.URL(), "Big")
	if err != nil || len(body) != 64<<10 {
		t.Fatalf("%d bytes, %v", len(body), err)
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("64 KiB at 32 KB/s took %v, want at least 1.5s", took)
	}
}

// TestTCPBlackHole: a call times out on the client's deadline and never
// reaches the upstream; removed, calls work again.
func TestTCPBlackHole(t *testing.T) {
	up := newFake(t)
	p := newTCP(t, up.URL())
	remove := p.BlackHole()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := post(ctx, p.URL(), "X"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call: %v, want the 1s deadline", err)
	}
	if n := up.n(); n != 0 {
		t.Errorf("upstream got %d calls, want 0", n)
	}
	remove()
	if _, err := post(t.Context(), p.URL(), "X"); err != nil {
		t.Errorf("after remove: %v", err)
	}
}

// TestTCPCut: connections are refused while cut; restore (once, whatever
// the number of calls) listens on the same address again.
func TestTCPCut(t *testing.T) {
	up := newFake(t)
	p := newTCP(t, up.URL())
	url := p.URL()
	restore := p.Cut()
	if _, err := post(t.Context(), url, "X"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("call while cut: %v, want connection refused", err)
	}
	restore()
	restore()
	if p.URL() != url {
		t.Errorf("URL %s after restore, was %s", p.URL(), url)
	}
	if _, err := post(t.Context(), url, "X"); err != nil {
		t.Errorf("after restore: %v", err)
	}
	// Nested cuts: the last restore reopens.
	r1, r2 := p.Cut(), p.Cut()
	r1()
	if _, err := post(t.Context(), url, "X"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("call with one cut left: %v, want connection refused", err)
	}
	r2()
	if _, err := post(t.Context(), url, "X"); err != nil {
		t.Errorf("after both restores: %v", err)
	}
}

// TestTCPCutClosesOpen: cutting closes a connection that was open.
func TestTCPCutClosesOpen(t *testing.T) {
	up := newFake(t)
	p := newTCP(t, up.URL())
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	restore := p.Cut()
	defer restore()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Errorf("read on a cut connection: %v, want it closed", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestTCPResetPeer: the call reaches the upstream, and the client's
// connection is reset; a connection open before ResetPeer is closed (so
// that none escapes the reset); removed, calls work again.
func TestTCPResetPeer(t *testing.T) {
	up := newFake(t)
	p := newTCP(t, up.URL())
	open, err := net.Dial("tcp", strings.TrimPrefix(p.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	remove := p.ResetPeer(0)
	_ = open.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("read on a connection open before ResetPeer: %v, want it closed", err)
	}
	if _, err := post(t.Context(), p.URL(), "X"); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("call: %v, want connection reset", err)
	}
	if n := up.n(); n != 1 {
		t.Errorf("upstream got %d calls, want 1", n)
	}
	remove()
	if _, err := post(t.Context(), p.URL(), "X"); err != nil {
		t.Errorf("after remove: %v", err)
	}
}

// TestTCPBadUpstream: an upstream without a port is refused.
func TestTCPBadUpstream(t *testing.T) {
	for _, up := range []string{"127.0.0.1", "http://127.0.0.1", "::bad"} {
		if p, err := faultnet.NewTCP("bad", up); err == nil {
			p.Close()
			t.Errorf("NewTCP(%q) succeeded", up)
		}
	}
}

// TestRoute: a call passes both layers; a fault of either reaches the
// client; Close leaves no goroutine behind (toxiproxy's per-connection
// goroutines end as their connections close, so the check waits for that).
func TestRoute(t *testing.T) {
	up := newFake(t) // its server is closed only after the test
	ignore := goleak.IgnoreCurrent()
	r, err := faultnet.NewRoute(faultnet.Kinesis, up.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := newClients(t, noRetries, r.URL(), "", "")
	if err := getRecords(t.Context(), c, fakeTarget); err != nil {
		t.Fatalf("GetRecords: %v", err)
	}
	remove := r.AWS.Inject(faultnet.Rule{Fault: faultnet.ExpiredIterator()})
	if err := getRecords(t.Context(), c, fakeTarget); status(err) != 400 {
		t.Errorf("GetRecords: %v, want 400 ExpiredIteratorException", err)
	}
	remove()
	restore := r.TCP.Cut()
	c.tr.CloseIdleConnections() // else the client may first write to its pooled connection, which the cut closed
	if err := getRecords(t.Context(), c, fakeTarget); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("GetRecords: %v, want connection refused", err)
	}
	restore()
	if err := getRecords(t.Context(), c, fakeTarget); err != nil {
		t.Errorf("GetRecords after restore: %v", err)
	}
	// A call in flight when the route closes ends.
	r.AWS.Inject(faultnet.Rule{Fault: faultnet.Latency(time.Hour)})
	before := r.AWS.Calls("GetRecords").Calls
	done := make(chan error, 1)
	go func() { done <- getRecords(context.Background(), c, fakeTarget) }()
	within(t, "the slow call to arrive", func() bool { return r.AWS.Calls("GetRecords").Calls == before+1 })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Errorf("the call in flight succeeded after Close")
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	c.tr.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := goleak.Find(ignore)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left 30s after Close: %v", err)
		}
	}
}
