package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// detachedProxy forwards HTTP requests to a stand-in and completes every
// request it has received in full even when its client is gone. The kill -9
// test sends the workers' DynamoDB traffic through it: dynalite 4.0.0 exits
// ("Error: aborted", ECONNRESET, thrown from its request error handler)
// when a client's connection closes in the middle of a request, which is
// what SIGKILL does to a worker with a checkpoint write in flight. Through
// the proxy, such a write reaches the stand-in whole, as it may reach AWS.
type detachedProxy struct {
	target string // e.g. http://127.0.0.1:4569
	client *http.Client
	srv    *http.Server
	ln     net.Listener
}

// startDetachedProxy listens on a free loopback port and forwards to target.
func startDetachedProxy(target string) (*detachedProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &detachedProxy{
		target: strings.TrimSuffix(target, "/"),
		// No compression: bodies and their checksums pass unchanged.
		client: &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16}, Timeout: time.Minute},
		ln:     ln,
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL returns the proxy's endpoint.
func (p *detachedProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy.
func (p *detachedProxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.srv.Shutdown(ctx)
}

// ServeHTTP forwards r once its body has arrived in full; a request cut
// short by its client is not forwarded at all.
func (p *detachedProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	// Not r.Context(): it ends when the client goes away.
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil && !errors.Is(err, io.EOF) {
		_, _ = io.Copy(io.Discard, resp.Body) // the client is gone: read the answer anyway
	}
}
