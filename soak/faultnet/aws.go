package faultnet

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rule says which calls get which fault. Rules are tried in the order they
// were injected; the first that applies to a call decides it, and a call no
// rule applies to is forwarded unchanged.
type Rule struct {
	// Ops are the operations the rule applies to, as named after the dot of
	// X-Amz-Target ("GetRecords", "PutItem", "SendMessageBatch"). Empty: every
	// operation (for PartialFailure: every batch write it knows).
	Ops []string
	// Match, when set, is a further filter on the request body, e.g. one
	// table or one shard. It is called with the AWS layer's lock held and
	// must not call the layer's methods; it must not keep or change body.
	Match func(op string, body []byte) bool
	// Fault is what a matching call gets.
	Fault Fault
	// Times is how many calls the rule applies to; then it is spent and
	// removed. 0: until removed.
	Times int
	// Rate is the probability, in (0, 1], that the rule applies to a
	// matching call; 0 means 1. A call the draw spares is tried against the
	// later rules. Draws come from the layer's own generator (see SetSeed).
	Rate float64
}

// Counts are one operation's calls through an AWS layer.
type Counts struct {
	// Calls is every call received.
	Calls int
	// Forwarded is the calls the stand-in answered (including the partial
	// batches of PartialFailure and the forwarded calls of CutBody,
	// LostResponse and Latency).
	Forwarded int
	// Faulted is the calls a rule was applied to.
	Faulted int
}

// maxBody bounds a request or a buffered answer the layer reads whole (a
// PutRecords is at most 10 MiB of data, base64-encoded).
const maxBody = 32 << 20

// AWS is an HTTP reverse proxy on 127.0.0.1 in front of one stand-in of one
// service. With no rule it forwards every request and answer unchanged,
// streaming answers as their bytes arrive (Kinesis SubscribeToShard's event
// stream included). A rule makes matching calls answer exactly as AWS
// answers that fault (see the package comment).
//
// An AWS is safe for concurrent use. Close stops it; a call in flight then
// ends with its connection closed.
type AWS struct {
	svc      Service
	upstream *url.URL
	ln       net.Listener
	srv      *http.Server
	tr       *http.Transport
	base     context.Context // canceled by Close: ends calls in flight
	stop     context.CancelFunc
	served   chan struct{} // closed when srv.Serve has returned

	mu       sync.Mutex
	rules    []*rule
	rnd      *mathrand.Rand
	counts   map[string]*Counts
	closed   bool
	handlers sync.WaitGroup // calls being handled; Add only under mu while !closed

	closeOnce sync.Once
	closeErr  error
}

// rule is an injected Rule and how often it was applied.
type rule struct {
	Rule
	applied int
}

// NewAWS starts an AWS layer for svc on a free port of 127.0.0.1, in front
// of the stand-in at upstream (an http:// URL, e.g. http://127.0.0.1:4568).
// Its draws for Rule.Rate are seeded from the clock; SetSeed fixes them.
func NewAWS(svc Service, upstream string) (*AWS, error) {
	switch svc {
	case Kinesis, DynamoDB, SQS:
	default:
		return nil, fmt.Errorf("faultnet: unknown service %q", svc)
	}
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("faultnet: upstream %q: %w", upstream, err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("faultnet: upstream %q: want http://host:port", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultnet: listen: %w", err)
	}
	base, stop := context.WithCancel(context.Background())
	seed := uint64(time.Now().UnixNano())
	a := &AWS{
		svc:      svc,
		upstream: &url.URL{Scheme: u.Scheme, Host: u.Host},
		ln:       ln,
		tr: &http.Transport{
			Proxy:                 nil, // never an HTTP proxy from the environment
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       30 * time.Second,
			DisableCompression:    true, // pass the client's Accept-Encoding and the answer's bytes through
			ExpectContinueTimeout: time.Second,
		},
		base:   base,
		stop:   stop,
		served: make(chan struct{}),
		rnd:    mathrand.New(mathrand.NewPCG(seed, seed>>1|1)),
		counts: map[string]*Counts{},
	}
	a.srv = &http.Server{
		Handler:           http.HandlerFunc(a.serve),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(a.served)
		_ = a.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return a, nil
}

// URL returns the layer's address, http://127.0.0.1:port: the endpoint for a
// client (o.BaseEndpoint) or a child process (AWS_ENDPOINT_URL_*).
func (a *AWS) URL() string { return "http://" + a.ln.Addr().String() }

// Service returns the service the layer speaks.
func (a *AWS) Service() Service { return a.svc }

// SetSeed reseeds the generator of the Rule.Rate draws, so that one sequence
// of calls meets the same faults on every run.
func (a *AWS) SetSeed(seed int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rnd = mathrand.New(mathrand.NewPCG(uint64(seed), uint64(seed)>>1|1))
}

// Inject adds r after the rules already there and returns a function that
// removes it; calling that again, or after the rule was spent or cleared,
// does nothing. Calls already being answered keep their fault. It panics,
// as for a programmer's error, when r's fault is invalid or has no answer
// for the layer's service, or when Times or Rate is out of range.
func (a *AWS) Inject(r Rule) (remove func()) {
	if r.Fault.kind == 0 {
		panic("faultnet: Inject: rule without a fault (use a constructor such as Throttled)")
	}
	if !r.Fault.supports(a.svc) {
		panic(fmt.Sprintf("faultnet: Inject: %v has no answer for %s", r.Fault, a.svc))
	}
	if r.Times < 0 || r.Rate < 0 || r.Rate > 1 {
		panic(fmt.Sprintf("faultnet: Inject: Times %d, Rate %v: want Times >= 0 and Rate in [0, 1]", r.Times, r.Rate))
	}
	r.Ops = append([]string(nil), r.Ops...)
	ru := &rule{Rule: r}
	a.mu.Lock()
	a.rules = append(a.rules, ru)
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.dropLocked(ru)
	}
}

// Clear removes every rule.
func (a *AWS) Clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rules = nil
}

// Calls returns the counts of operation op ("GetRecords", "PutItem", ...),
// or of every operation together when op is "".
func (a *AWS) Calls(op string) Counts {
	a.mu.Lock()
	defer a.mu.Unlock()
	if op != "" {
		if c := a.counts[op]; c != nil {
			return *c
		}
		return Counts{}
	}
	var sum Counts
	for _, c := range a.counts {
		sum.Calls += c.Calls
		sum.Forwarded += c.Forwarded
		sum.Faulted += c.Faulted
	}
	return sum
}

// Close stops the layer: it refuses new connections, ends the calls in
// flight (their clients see the connection closed), waits for their
// handlers, and closes its connections to the stand-in. The transport's
// connection goroutines end right after, as their connections close. Close
// is idempotent; it returns the error of the first call.
func (a *AWS) Close() error {
	a.closeOnce.Do(func() {
		a.mu.Lock()
		a.closed = true
		a.rules = nil
		a.mu.Unlock()
		a.stop()
		err := a.srv.Close()
		a.handlers.Wait()
		<-a.served
		a.tr.CloseIdleConnections()
		if err != nil {
			a.closeErr = fmt.Errorf("faultnet: close %s layer: %w", a.svc, err)
		}
	})
	return a.closeErr
}

// dropLocked removes ru from the rules, if it is still there.
func (a *AWS) dropLocked(ru *rule) {
	for i, x := range a.rules {
		if x == ru {
			a.rules = append(a.rules[:i:i], a.rules[i+1:]...)
			return
		}
	}
}

// enter registers a call being handled; false once the layer is closed.
func (a *AWS) enter() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.handlers.Add(1)
	return true
}

// pick counts a call of op and returns the fault of the first rule that
// applies to it, if any.
func (a *AWS) pick(op string, body []byte) (Fault, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.countsLocked(op)
	c.Calls++
	for _, ru := range a.rules {
		if len(ru.Ops) > 0 && !contains(ru.Ops, op) {
			continue
		}
		if !ru.Fault.applies(a.svc, op) {
			continue
		}
		if ru.Match != nil && !ru.Match(op, body) {
			continue
		}
		if ru.Rate > 0 && ru.Rate < 1 && a.rnd.Float64() >= ru.Rate {
			continue
		}
		ru.applied++
		if ru.Times > 0 && ru.applied >= ru.Times {
			a.dropLocked(ru)
		}
		c.Faulted++
		return ru.Fault, true
	}
	return Fault{}, false
}

func (a *AWS) countsLocked(op string) *Counts {
	c := a.counts[op]
	if c == nil {
		c = &Counts{}
		a.counts[op] = c
	}
	return c
}

func (a *AWS) forwarded(op string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.countsLocked(op).Forwarded++
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// operation returns the operation X-Amz-Target names: the part after the
// last dot ("Kinesis_20131202.GetRecords" → "GetRecords"), or "".
func operation(r *http.Request) string {
	t := r.Header.Get("X-Amz-Target")
	return t[strings.LastIndexByte(t, '.')+1:]
}

// serve handles one call.
func (a *AWS) serve(w http.ResponseWriter, r *http.Request) {
	if !a.enter() {
		http.Error(w, "faultnet: closed", http.StatusServiceUnavailable)
		return
	}
	defer a.handlers.Done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(a.base, cancel)()

	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, "faultnet: request body unreadable or over 32 MiB", http.StatusBadRequest)
		return
	}
	op := operation(r)
	f, ok := a.pick(op, body)
	if !ok {
		a.forward(ctx, w, r, op, body)
		return
	}
	switch f.kind {
	case kindAnswer:
		a.answerError(w, f.errs[a.svc], call{op: op, body: body})
	case kindLatency:
		t := time.NewTimer(f.delay)
		select {
		case <-t.C:
			a.forward(ctx, w, r, op, body)
		case <-ctx.Done():
			t.Stop()
		}
	case kindCut:
		a.cut(ctx, w, r, op, body)
	case kindLost:
		resp, ok := a.roundTrip(ctx, w, r, op, body, false)
		if !ok {
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			a.relay(w, resp)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body) // the stand-in's answer is what is lost
		a.answerError(w, f.errs[a.svc], call{op: op, body: body})
	case kindPartial:
		a.partial(ctx, w, r, op, body, f)
	}
}

// forward sends the call to the stand-in and relays its answer.
func (a *AWS) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, op string, body []byte) {
	resp, ok := a.roundTrip(ctx, w, r, op, body, false)
	if !ok {
		return
	}
	defer resp.Body.Close()
	a.relay(w, resp)
}

// roundTrip sends the call, with body, to the stand-in. When the stand-in
// cannot be reached it answers the client 502 (which the SDK retries, as a
// 502 of AWS's front end) and returns false. plain drops the client's
// Accept-Encoding, for an answer the layer must read.
func (a *AWS) roundTrip(ctx context.Context, w http.ResponseWriter, r *http.Request, op string, body []byte, plain bool) (*http.Response, bool) {
	u := *a.upstream
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "faultnet: "+err.Error(), http.StatusBadGateway)
		return nil, false
	}
	copyHeader(out.Header, r.Header)
	out.Header.Del("Content-Length")
	if plain {
		out.Header.Del("Accept-Encoding")
	}
	out.Host = r.Host
	out.ContentLength = int64(len(body))
	resp, err := a.tr.RoundTrip(out)
	if err != nil {
		if ctx.Err() == nil {
			http.Error(w, "faultnet: stand-in unreachable: "+err.Error(), http.StatusBadGateway)
		}
		return nil, false
	}
	a.forwarded(op)
	return resp, true
}

// relay sends the stand-in's answer to the client, flushing as bytes
// arrive.
func (a *AWS) relay(w http.ResponseWriter, resp *http.Response) {
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if ferr := rc.Flush(); ferr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF, or the stand-in or the client went away
		}
	}
}

// cut forwards the call and sends half of the answer's body, then closes
// the connection.
func (a *AWS) cut(ctx context.Context, w http.ResponseWriter, r *http.Request, op string, body []byte) {
	resp, ok := a.roundTrip(ctx, w, r, op, body, false)
	if !ok {
		return
	}
	defer resp.Body.Close()
	var part []byte
	if resp.ContentLength >= 0 {
		all, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if err != nil {
			return
		}
		part = all[:len(all)/2]
	} else {
		buf := make([]byte, 32<<10)
		n, err := io.ReadAtLeast(resp.Body, buf, 1)
		if err != nil && n == 0 {
			return
		}
		part = buf[:n/2]
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(part)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if conn, _, err := rc.Hijack(); err == nil {
		conn.Close()
	}
	// Without a hijack (not HTTP/1) net/http closes a connection whose
	// answer is shorter than its Content-Length when the handler returns.
}

// answerError sends e as the layer's service sends it.
func (a *AWS) answerError(w http.ResponseWriter, e *wireError, c call) {
	v := map[string]any{"__type": e.typ, "message": e.message(c)}
	if e.reasons != "" {
		if _, _, table := c.names(); table != "" {
			v["ThrottlingReasons"] = []map[string]string{{
				"reason":   "Table" + readOrWrite(c.op) + e.reasons,
				"resource": fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", region, account, table),
			}}
		}
	}
	body, _ := json.Marshal(v) // strings and string maps only: cannot fail
	h := w.Header()
	if e.query != "" {
		h.Set("X-Amzn-Query-Error", e.query)
	}
	a.answer(w, e.status, body)
}

// answer sends a made-up answer with the headers the layer's service
// sends: Content-Type of its JSON protocol, x-amzn-RequestId, and Kinesis's
// x-amz-id-2 or DynamoDB's x-amz-crc32 of the body.
func (a *AWS) answer(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("X-Amzn-Requestid", requestID(a.svc))
	switch a.svc {
	case Kinesis:
		h.Set("Content-Type", "application/x-amz-json-1.1")
		h.Set("X-Amz-Id-2", hexID(48))
	case DynamoDB:
		h.Set("Content-Type", "application/x-amz-json-1.0")
		h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	case SQS:
		h.Set("Content-Type", "application/x-amz-json-1.0")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// readOrWrite names the kind of capacity a DynamoDB operation uses.
func readOrWrite(op string) string {
	switch op {
	case "GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "ExecuteStatement":
		return "Read"
	}
	return "Write"
}

// requestID returns a request id shaped as the service's: DynamoDB's 52
// upper-case letters and digits, the others' UUID.
func requestID(svc Service) string {
	if svc == DynamoDB {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		b := make([]byte, 52)
		for i := range b {
			b[i] = alphabet[mathrand.IntN(len(alphabet))]
		}
		return string(b)
	}
	h := hexID(32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// hexID returns n random hex digits (n even).
func hexID(n int) string {
	b := make([]byte, n/2)
	for i := range b {
		b[i] = byte(mathrand.Uint32())
	}
	return hex.EncodeToString(b)
}

// hopHeaders are the hop-by-hop headers a proxy does not pass on (RFC 9110
// section 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// copyHeader copies src's end-to-end headers to dst.
func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, k := range hopHeaders {
		dst.Del(k)
	}
}
