package emf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/observe/emf"
)

const (
	arn    = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
	shard0 = "shardId-000000000000"
)

var epoch = time.UnixMilli(1700000000123)

func clock() time.Time { return epoch }

// units is the specification's list of units.
var units = map[string]bool{
	"Seconds": true, "Microseconds": true, "Milliseconds": true, "Bytes": true, "Kilobytes": true,
	"Megabytes": true, "Gigabytes": true, "Terabytes": true, "Bits": true, "Kilobits": true, "Megabits": true,
	"Gigabits": true, "Terabits": true, "Percent": true, "Count": true, "Bytes/Second": true,
	"Kilobytes/Second": true, "Megabytes/Second": true, "Gigabytes/Second": true, "Terabytes/Second": true,
	"Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true, "Gigabits/Second": true,
	"Terabits/Second": true, "Count/Second": true, "None": true,
}

// doc is one parsed EMF document.
type doc struct {
	root      map[string]any
	timestamp int64
	namespace string
	dims      [][]string
	metrics   map[string]string // name → unit
}

// group is the dimension values of d, as "name=value" joined by "|", over
// the names of all its dimension sets, sorted.
func (d doc) group() string {
	seen := map[string]bool{}
	var parts []string
	for _, set := range d.dims {
		for _, n := range set {
			if !seen[n] {
				seen[n] = true
				parts = append(parts, n+"="+d.root[n].(string))
			}
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "|")
}

// parse checks line against the embedded metric format specification and
// the limits the exporter keeps, and returns the document.
func parse(t *testing.T, line []byte, limit int) doc {
	t.Helper()
	fail := func(format string, args ...any) doc {
		t.Helper()
		t.Fatalf("%s\nline: %.600s", fmt.Sprintf(format, args...), line)
		return doc{}
	}
	if len(line) > limit {
		return fail("line of %d bytes, limit %d", len(line), limit)
	}
	if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
		return fail("not exactly one line")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return fail("not a JSON object: %v", err)
	}
	if dec.More() {
		return fail("data after the object")
	}
	d := doc{root: root, metrics: map[string]string{}}
	aws, ok := root["_aws"].(map[string]any)
	if !ok {
		return fail("no _aws object")
	}
	for k := range aws {
		if k != "Timestamp" && k != "CloudWatchMetrics" {
			return fail("_aws member %q", k)
		}
	}
	ts, ok := aws["Timestamp"].(json.Number)
	if !ok {
		return fail("Timestamp is not a number")
	}
	n, err := ts.Int64()
	if err != nil || n <= 0 {
		return fail("Timestamp %v is not milliseconds since the epoch", ts)
	}
	d.timestamp = n
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok || len(directives) == 0 {
		return fail("CloudWatchMetrics is not a non-empty array")
	}
	for _, x := range directives {
		dir, ok := x.(map[string]any)
		if !ok {
			return fail("directive is not an object")
		}
		for k := range dir {
			if k != "Namespace" && k != "Dimensions" && k != "Metrics" {
				return fail("directive member %q", k)
			}
		}
		ns, ok := dir["Namespace"].(string)
		if !ok || ns == "" || len(ns) > 255 || strings.HasPrefix(ns, "AWS/") {
			return fail("Namespace %v", dir["Namespace"])
		}
		d.namespace = ns
		sets, ok := dir["Dimensions"].([]any)
		if !ok {
			return fail("Dimensions is not an array")
		}
		for _, s := range sets {
			set, ok := s.([]any)
			if !ok || len(set) == 0 || len(set) > 30 {
				return fail("dimension set %v: not an array of 1 to 30 names", s)
			}
			var names []string
			for _, n := range set {
				name, ok := n.(string)
				if !ok {
					return fail("dimension name %v is not a string", n)
				}
				v, ok := root[name].(string)
				if !ok || v == "" || len(v) > 1024 {
					return fail("dimension %q: root member %v is not a string of 1 to 1024 bytes", name, root[name])
				}
				names = append(names, name)
			}
			d.dims = append(d.dims, names)
		}
		defs, ok := dir["Metrics"].([]any)
		if !ok || len(defs) == 0 || len(defs) > 100 {
			return fail("Metrics is not an array of 1 to 100 definitions")
		}
		for _, x := range defs {
			def, ok := x.(map[string]any)
			if !ok {
				return fail("metric definition is not an object")
			}
			for k := range def {
				if k != "Name" && k != "Unit" {
					return fail("metric definition member %q", k)
				}
			}
			name, _ := def["Name"].(string)
			unit, _ := def["Unit"].(string)
			if name == "" || len(name) > 255 {
				return fail("metric name %v", def["Name"])
			}
			if !units[unit] {
				return fail("metric %s: unit %q is not on the list", name, unit)
			}
			if _, dup := d.metrics[name]; dup {
				return fail("metric %s declared twice", name)
			}
			d.metrics[name] = unit
			switch v := root[name].(type) {
			case json.Number:
			case []any:
				if len(v) == 0 || len(v) > 100 {
					return fail("metric %s: %d values", name, len(v))
				}
				for _, x := range v {
					if _, ok := x.(json.Number); !ok {
						return fail("metric %s: value %v is not a number", name, x)
					}
				}
			default:
				return fail("metric %s: root member %v is not a number or an array of numbers", name, root[name])
			}
		}
	}
	for _, set := range d.dims {
		for _, n := range set {
			if _, clash := d.metrics[n]; clash {
				return fail("%s is both a dimension and a metric", n)
			}
		}
	}
	return d
}

// flushed is the documents of one or more Flushes, summed per group of
// dimension values.
type flushed struct {
	docs   []doc
	counts map[string]map[string]int64     // group → metric → sum of scalars
	values map[string]map[string][]float64 // group → metric → values, in order
	units  map[string]string
}

func newFlushed() *flushed {
	return &flushed{counts: map[string]map[string]int64{}, values: map[string]map[string][]float64{}, units: map[string]string{}}
}

func (f *flushed) add(t *testing.T, out []byte, limit int) {
	t.Helper()
	for len(out) > 0 {
		i := bytes.IndexByte(out, '\n')
		if i < 0 {
			t.Fatalf("output does not end with a newline: %.200q", out)
		}
		d := parse(t, out[:i+1], limit)
		out = out[i+1:]
		f.docs = append(f.docs, d)
		g := d.group()
		if f.counts[g] == nil {
			f.counts[g], f.values[g] = map[string]int64{}, map[string][]float64{}
		}
		for name, unit := range d.metrics {
			if u, ok := f.units[name]; ok && u != unit {
				t.Errorf("metric %s: unit %s, earlier %s", name, unit, u)
			}
			f.units[name] = unit
			switch v := d.root[name].(type) {
			case json.Number:
				if _, ok := f.values[g][name]; ok {
					t.Errorf("%s %s: a scalar and an array", g, name)
				}
				n, err := v.Int64()
				if err != nil {
					t.Fatalf("%s %s: count %v is not an integer", g, name, v)
				}
				f.counts[g][name] += n
			case []any:
				if _, ok := f.counts[g][name]; ok {
					t.Errorf("%s %s: a scalar and an array", g, name)
				}
				for _, x := range v {
					n, _ := x.(json.Number).Float64()
					f.values[g][name] = append(f.values[g][name], n)
				}
			}
		}
	}
}

// flush flushes e into w (which e writes to) and parses what it wrote.
func flush(t *testing.T, e *emf.Exporter, w *bytes.Buffer) *flushed {
	t.Helper()
	w.Reset()
	e.Flush(t.Context())
	f := newFlushed()
	f.add(t, w.Bytes(), emf.LineLimit)
	return f
}

func sum(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		s += v
	}
	return s
}

const lambdaGroup = "Stream=orders|service=orders-svc"

// lambdaBatch feeds e the events of one Lambda invocation of 156 records
// and returns the counts it must produce.
func lambdaBatch(e *emf.Exporter) map[string]int64 {
	rec := func(i int, outcome string, action observe.Action) observe.Record {
		return observe.Record{
			Mode: observe.ModeLambda, Stream: arn, ShardID: shard0, SequenceNumber: fmt.Sprintf("seq-%03d", i),
			Outcome: outcome, Action: action, Attempt: 1,
		}
	}
	write := func(i int, kind observe.WriteKind, err error) {
		e.OnWrite(observe.Write{Mode: observe.ModeLambda, Kind: kind, ShardID: shard0, SequenceNumber: fmt.Sprintf("seq-%03d", i), Err: err})
	}
	for i := range 150 {
		var r observe.Record
		switch i % 10 {
		case 6:
			r = rec(i, "drop", observe.ActionSettled)
		case 7:
			r = rec(i, "retry", observe.ActionCopy)
		case 8:
			r = rec(i, "retry_after", observe.ActionDelay)
		case 9:
			r = rec(i, "retry", observe.ActionUnsettled)
		default:
			r = rec(i, "ack", observe.ActionSettled)
		}
		r.Handled = time.Duration(i+1) * time.Millisecond
		r.Age = time.Duration(i) * time.Second
		e.OnRecord(r)
		switch i % 10 {
		case 7:
			write(i, observe.WriteCopy, nil)
		case 8:
			var err error
			if i%30 == 8 {
				err = errors.New("throttled")
			}
			write(i, observe.WriteDelay, err)
		}
	}
	for i := 150; i < 153; i++ { // poison: dead-lettered
		r := rec(i, "drop", observe.ActionDeadLetter)
		r.Reason = "malformed aggregate"
		e.OnRecord(r)
		write(i, observe.WriteDeadLetter, nil)
	}
	for i := 153; i < 155; i++ { // past the maximum record age, no dead-letter target
		r := rec(i, "drop", observe.ActionSettled)
		r.Reason = "max record age"
		e.OnRecord(r)
	}
	e.OnRecord(rec(155, "retry", observe.ActionRetired))
	for i := range 4 {
		write(i, observe.WriteReply, nil)
	}
	e.OnInvocation(observe.Invocation{Records: 156, Failures: 1, Duration: 900 * time.Millisecond, OldestAge: 200 * time.Second, Stream: arn})
	return map[string]int64{
		"RecordsHandled": 156, "RecordsHandledAck": 90, "RecordsHandledDrop": 20, "RecordsHandledRetry": 31,
		"RecordsHandledRetryAfter": 15, "RecordsDropped": 17, "RecordsUnsettled": 15, "RecordsRetired": 1,
		"PoisonRecords": 3, "RecordsExpired": 2, "Copies": 15, "DelayMessages": 10, "DeadLetters": 3,
		"Replies": 4, "WriteFailures": 5, "BatchItemFailures": 1,
	}
}

func newLambda(w io.Writer, opts ...emf.Option) *emf.Exporter {
	return emf.New(w, append([]emf.Option{
		emf.WithService("orders-svc"), emf.WithFunctionName("orders-fn"), emf.WithClock(clock),
	}, opts...)...)
}

func TestLambdaInvocation(t *testing.T) {
	var w bytes.Buffer
	e := newLambda(&w)
	want := lambdaBatch(e)
	f := flush(t, e, &w)

	if diff := cmp.Diff(want, f.counts[lambdaGroup]); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	hd := f.values[lambdaGroup]["HandlerDuration"]
	if len(hd) != 150 || sum(hd) != 150*151/2 {
		t.Errorf("HandlerDuration: %d values summing to %v, want 150 summing to %d", len(hd), sum(hd), 150*151/2)
	}
	if diff := cmp.Diff(map[string][]float64{
		"HandlerDuration": hd, "InvocationDuration": {900}, "OldestRecordAge": {200000},
	}, f.values[lambdaGroup]); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	for name, unit := range map[string]string{"RecordsHandled": "Count", "HandlerDuration": "Milliseconds", "OldestRecordAge": "Milliseconds", "ColdStart": "Count"} {
		if f.units[name] != unit {
			t.Errorf("%s: unit %q, want %q", name, f.units[name], unit)
		}
	}

	// ColdStart first, in its own document; then the invocation's group in
	// two documents (HandlerDuration has 150 values).
	if len(f.docs) != 3 {
		t.Fatalf("%d documents, want 3", len(f.docs))
	}
	cold := f.docs[0]
	if diff := cmp.Diff([][]string{{"function_name", "service"}}, cold.dims); diff != "" {
		t.Errorf("ColdStart dimensions (-want +got):\n%s", diff)
	}
	if got := f.counts["function_name=orders-fn|service=orders-svc"]; !cmp.Equal(got, map[string]int64{"ColdStart": 1}) {
		t.Errorf("ColdStart document: %v", got)
	}
	first, second := f.docs[1], f.docs[2]
	for _, d := range f.docs {
		if d.timestamp != epoch.UnixMilli() || d.namespace != "lambdaadapter" {
			t.Errorf("Timestamp %d namespace %q, want %d lambdaadapter", d.timestamp, d.namespace, epoch.UnixMilli())
		}
	}
	if diff := cmp.Diff([][]string{{"service", "Stream"}}, first.dims); diff != "" {
		t.Errorf("dimensions (-want +got):\n%s", diff)
	}
	for k, v := range map[string]string{
		"OldestHandledShardId": shard0, "OldestHandledSequenceNumber": "seq-149",
		"LastPoisonShardId": shard0, "LastPoisonSequenceNumber": "seq-152",
		"LastWriteFailureKind": "delay", "LastWriteFailureShardId": shard0, "LastWriteFailureSequenceNumber": "seq-128",
	} {
		if first.root[k] != v {
			t.Errorf("root member %s = %v, want %q", k, first.root[k], v)
		}
		if _, ok := second.root[k]; ok {
			t.Errorf("root member %s repeated in the second document", k)
		}
	}
	if got := slices.Sorted(maps.Keys(second.metrics)); !cmp.Equal(got, []string{"HandlerDuration"}) {
		t.Errorf("second document declares %v, want only HandlerDuration", got)
	}
	if n := len(second.root["HandlerDuration"].([]any)); n != 50 {
		t.Errorf("second document: %d HandlerDuration values, want 50", n)
	}

	// The next invocation: no ColdStart, nothing of the first.
	e.OnRecord(observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: shard0, SequenceNumber: "seq-200", Outcome: "ack", Action: observe.ActionSettled, Handled: time.Millisecond})
	e.OnInvocation(observe.Invocation{Records: 1, Duration: 5 * time.Millisecond, OldestAge: time.Second, Stream: arn})
	f = flush(t, e, &w)
	if len(f.docs) != 1 {
		t.Fatalf("second Flush: %d documents, want 1", len(f.docs))
	}
	if diff := cmp.Diff(map[string]int64{"RecordsHandled": 1, "RecordsHandledAck": 1}, f.counts[lambdaGroup]); diff != "" {
		t.Errorf("second Flush counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]float64{"HandlerDuration": {1}, "InvocationDuration": {5}, "OldestRecordAge": {1000}}, f.values[lambdaGroup]); diff != "" {
		t.Errorf("second Flush values (-want +got):\n%s", diff)
	}

	// An interval without events writes nothing.
	for range 2 {
		if f := flush(t, e, &w); len(f.docs) != 0 {
			t.Errorf("empty interval: %d documents", len(f.docs))
		}
	}
}

func TestLongRunning(t *testing.T) {
	var w bytes.Buffer
	e := emf.New(&w, emf.WithService("svc"), emf.WithClock(clock))
	// Reads, leases and checkpoints name the stream; records carry its ARN.
	read := func(shard string, n int, behind int64) {
		e.OnRead(observe.Read{Stream: "orders", ShardID: shard, Records: n, MillisBehindLatest: behind})
	}
	read("shardId-0", 10, 100)
	read("shardId-0", 10, 500)
	read("shardId-0", 10, 300)
	read("shardId-1", 5, 0)
	read("shardId-1", 5, 0)
	read("shardId-2", 0, 2000)
	for _, k := range []observe.LeaseEventKind{observe.LeaseTaken, observe.LeaseTaken, observe.LeaseStolen, observe.LeaseReceived, observe.LeaseLost, observe.LeaseHandedOn} {
		e.OnLease(observe.Lease{Stream: "orders", ShardID: "shardId-0", Kind: k, Held: 2})
	}
	for i := range 7 {
		var err error
		if i%3 == 2 {
			err = errors.New("conditional check failed")
		}
		e.OnCheckpoint(observe.Checkpoint{Stream: "orders", ShardID: "shardId-0", Checkpoint: "1", Err: err})
	}
	for i := range 10 {
		e.OnRecord(observe.Record{Mode: observe.ModeECS, Stream: arn, ShardID: "shardId-0", SequenceNumber: fmt.Sprint(i), Outcome: "ack", Action: observe.ActionSettled, Handled: time.Millisecond})
	}
	e.OnInFlight(observe.InFlight{Stream: arn, Records: 42, OldestAge: 1500 * time.Millisecond, LeasesHeld: 3})
	f := flush(t, e, &w)

	const g = "Stream=orders|service=svc"
	if len(f.docs) != 1 {
		t.Fatalf("%d documents, want 1 (no ColdStart in long-running mode)", len(f.docs))
	}
	if diff := cmp.Diff(map[string]int64{
		"RecordsHandled": 10, "RecordsHandledAck": 10, "RecordsRead": 40, "LeaseTakes": 2, "LeaseSteals": 1,
		"LeaseHandoffs": 1, "LeaseLosses": 1, "CheckpointWrites": 5, "CheckpointFailures": 2,
		"LeasesHeld": 3, "RecordsInFlight": 42,
	}, f.counts[g]); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	behind := slices.Sorted(slices.Values(f.values[g]["MillisBehindLatest"]))
	if diff := cmp.Diff([]float64{0, 500, 2000}, behind); diff != "" {
		t.Errorf("MillisBehindLatest (-want +got):\n%s", diff)
	}
	if got := f.values[g]["OldestRecordAge"]; !cmp.Equal(got, []float64{1500}) {
		t.Errorf("OldestRecordAge %v, want [1500]", got)
	}
	if got := f.docs[0].root["MillisBehindLatestShardId"]; got != "shardId-2" {
		t.Errorf("MillisBehindLatestShardId %v, want shardId-2", got)
	}

	// The gauges of an interval with only the snapshot taken before Flush.
	e.OnInFlight(observe.InFlight{Stream: "orders", LeasesHeld: 3})
	f = flush(t, e, &w)
	if diff := cmp.Diff(map[string]int64{"LeasesHeld": 3, "RecordsInFlight": 0}, f.counts[g]); diff != "" {
		t.Errorf("gauges (-want +got):\n%s", diff)
	}
	if got := f.values[g]["OldestRecordAge"]; !cmp.Equal(got, []float64{0}) {
		t.Errorf("OldestRecordAge %v, want [0]", got)
	}
}

func TestShardDimension(t *testing.T) {
	var w bytes.Buffer
	e := newLambda(&w, emf.WithShardDimension())
	shards := []string{"shardId-a", "shardId-b", "shardId-c"}
	for i := range 30 {
		s := shards[i%3]
		e.OnRecord(observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: s, SequenceNumber: fmt.Sprint(i), Outcome: "retry", Action: observe.ActionCopy, Handled: time.Millisecond})
		e.OnWrite(observe.Write{Mode: observe.ModeLambda, Kind: observe.WriteCopy, ShardID: s, SequenceNumber: fmt.Sprint(i)})
	}
	e.OnInvocation(observe.Invocation{Records: 30, Duration: time.Second, Stream: arn})
	f := flush(t, e, &w)
	for _, s := range shards {
		g := "ShardId=" + s + "|" + lambdaGroup
		if diff := cmp.Diff(map[string]int64{"RecordsHandled": 10, "RecordsHandledRetry": 10, "Copies": 10}, f.counts[g]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", g, diff)
		}
	}
	if diff := cmp.Diff(map[string][]float64{"InvocationDuration": {1000}, "OldestRecordAge": {0}}, f.values[lambdaGroup]); diff != "" {
		t.Errorf("stream group (-want +got):\n%s", diff)
	}
	for _, d := range f.docs {
		want := [][]string{{"service", "Stream"}, {"service", "Stream", "ShardId"}}
		switch {
		case d.metrics["ColdStart"] != "":
			continue
		case d.root["ShardId"] == nil:
			want = want[:1]
		}
		if diff := cmp.Diff(want, d.dims); diff != "" {
			t.Errorf("dimensions (-want +got):\n%s", diff)
		}
	}
}

// TestServiceDimension: with several streams, each stream's document
// declares [service] beside [service, Stream] (and the shard set when
// asked), so CloudWatch's Maximum of MillisBehindLatest under [service] is
// the furthest-behind shard of every stream; Environment sets it when
// LAMBDAADAPTER_STREAM lists several streams, and only then.
func TestServiceDimension(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		opts   []emf.Option
		want   [][]string
	}{
		{"one stream", "orders", nil, [][]string{{"service", "Stream"}}},
		{"several streams", "orders,payments", nil, [][]string{{"service", "Stream"}, {"service"}}},
		{"several streams, per shard", "orders, arn:aws:kinesis:eu-west-1:123456789012:stream/payments", []emf.Option{emf.WithShardDimension()},
			[][]string{{"service", "Stream"}, {"service", "Stream", "ShardId"}, {"service"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "LAMBDAADAPTER_STREAM" {
					return tc.stream
				}
				return ""
			}
			var w bytes.Buffer
			e := emf.New(&w, append(append(emf.Environment(getenv), tc.opts...), emf.WithService("svc"), emf.WithClock(clock))...)
			e.OnRead(observe.Read{Stream: "orders", ShardID: "shardId-0", Records: 1, MillisBehindLatest: 500})
			e.OnRead(observe.Read{Stream: "payments", ShardID: "shardId-0", Records: 1, MillisBehindLatest: 9000})
			f := flush(t, e, &w)
			if len(f.docs) != 2 {
				t.Fatalf("%d documents, want one per stream", len(f.docs))
			}
			for _, d := range f.docs {
				if diff := cmp.Diff(tc.want, d.dims); diff != "" {
					t.Errorf("%v: dimensions (-want +got):\n%s", d.root["Stream"], diff)
				}
			}
		})
	}
}

func TestUnknownStream(t *testing.T) {
	var w bytes.Buffer
	e := newLambda(&w)
	// A reply written before any record of its shard was concluded, and an
	// invocation without Kinesis records: published under service only.
	e.OnWrite(observe.Write{Mode: observe.ModeLambda, Kind: observe.WriteReply, ShardID: shard0})
	e.OnInvocation(observe.Invocation{Duration: time.Millisecond})
	// Then a record: later writes of its shard are counted with its stream.
	e.OnRecord(observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: shard0, Outcome: "ack", Action: observe.ActionSettled})
	e.OnWrite(observe.Write{Mode: observe.ModeLambda, Kind: observe.WriteReply, ShardID: shard0})
	e.OnWrite(observe.Write{Mode: observe.ModeLambda, Kind: observe.WriteReply, ShardID: "shardId-other"})
	f := flush(t, e, &w)
	if diff := cmp.Diff(map[string]int64{"Replies": 1}, f.counts["service=orders-svc"]); diff != "" {
		t.Errorf("service group (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]float64{"InvocationDuration": {1}}, f.values["service=orders-svc"]); diff != "" {
		t.Errorf("service group values (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{"RecordsHandled": 1, "RecordsHandledAck": 1, "Replies": 2}, f.counts[lambdaGroup]); diff != "" {
		t.Errorf("stream group (-want +got):\n%s", diff)
	}
}

func TestSplitByLineSize(t *testing.T) {
	const limit = 1500
	var w bytes.Buffer
	e := newLambda(&w, emf.WithLineLimit(limit), emf.WithRecordAge(), emf.WithMaxValues(0))
	var wantSum float64
	for i := range 1000 {
		d := time.Duration(i)*time.Millisecond + 123*time.Microsecond
		wantSum += float64(i) + 0.123
		e.OnRecord(observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: shard0, SequenceNumber: fmt.Sprint(i), Outcome: "ack", Action: observe.ActionSettled, Handled: d, Age: d})
	}
	w.Reset()
	e.Flush(t.Context())
	f := newFlushed()
	f.add(t, w.Bytes(), limit)
	if len(f.docs) < 15 {
		t.Errorf("%d documents: lines of %d bytes should hold fewer values", len(f.docs), limit)
	}
	for _, name := range []string{"HandlerDuration", "RecordAge"} {
		vs := f.values[lambdaGroup][name]
		if len(vs) != 1000 || fmt.Sprintf("%.3f", sum(vs)) != fmt.Sprintf("%.3f", wantSum) {
			t.Errorf("%s: %d values summing to %.3f, want 1000 summing to %.3f", name, len(vs), sum(vs), wantSum)
		}
	}
	if got := f.counts[lambdaGroup]["RecordsHandled"]; got != 1000 {
		t.Errorf("RecordsHandled %d, want 1000", got)
	}
}

func TestEncoderLimits(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		scalars, arrays, values int
		limit                   int
		minDocs                 int
	}{
		{"250 counters", 250, 0, 0, emf.LineLimit, 3},
		{"150 arrays of 250 values", 0, 150, 250, emf.LineLimit, 6},
		{"both, small lines", 120, 20, 130, 4000, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := emf.Encode(tc.scalars, tc.arrays, tc.values, tc.limit)
			f := newFlushed()
			f.add(t, out, tc.limit)
			if len(f.docs) < tc.minDocs {
				t.Errorf("%d documents, want at least %d", len(f.docs), tc.minDocs)
			}
			g := "service=svc"
			if len(f.counts[g]) != tc.scalars {
				t.Errorf("%d counters, want %d", len(f.counts[g]), tc.scalars)
			}
			for name, n := range f.counts[g] {
				var i int
				fmt.Sscanf(name, "C%d", &i)
				if n != int64(i+1) {
					t.Errorf("%s = %d, want %d", name, n, i+1)
				}
			}
			if len(f.values[g]) != tc.arrays {
				t.Errorf("%d value arrays, want %d", len(f.values[g]), tc.arrays)
			}
			for name, vs := range f.values[g] {
				if len(vs) != tc.values || vs[0] != 0.5 || vs[len(vs)-1] != float64(tc.values)-0.5 {
					t.Errorf("%s: %d values from %v to %v", name, len(vs), vs[0], vs[len(vs)-1])
				}
			}
			for i, d := range f.docs {
				if _, ok := d.root["Note"]; ok != (i == 0) {
					t.Errorf("document %d: first-document member present %v", i, ok)
				}
			}
		})
	}
}

func TestMaxValues(t *testing.T) {
	var w bytes.Buffer
	e := newLambda(&w, emf.WithMaxValues(300))
	for i := range 5000 {
		e.OnRecord(observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: shard0, Outcome: "ack", Action: observe.ActionSettled, Handled: time.Duration(i%10+1) * time.Millisecond})
	}
	f := flush(t, e, &w)
	vs := f.values[lambdaGroup]["HandlerDuration"]
	if len(vs) != 300 {
		t.Fatalf("%d HandlerDuration values, want the cap of 300", len(vs))
	}
	// A uniform sample of 1..10 ms: every value is in range and the mean is
	// near 5.5.
	if m := sum(vs) / 300; m < 4.5 || m > 6.5 {
		t.Errorf("mean of the sample %.2f, want about 5.5", m)
	}
	if got := f.counts[lambdaGroup]["RecordsHandled"]; got != 5000 {
		t.Errorf("RecordsHandled %d, want 5000", got)
	}
}

func TestFlushContextDone(t *testing.T) {
	var w bytes.Buffer
	e := newLambda(&w)
	for range 250 {
		e.OnRecord(observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: shard0, Outcome: "ack", Action: observe.ActionSettled, Handled: time.Millisecond})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	e.Flush(ctx)
	f := newFlushed()
	f.add(t, w.Bytes(), emf.LineLimit)
	// ColdStart and the document with the counts (and the first 100
	// values); not the two with the other 150 values.
	if len(f.docs) != 2 {
		t.Fatalf("%d documents, want 2", len(f.docs))
	}
	if got := f.counts[lambdaGroup]["RecordsHandled"]; got != 250 {
		t.Errorf("RecordsHandled %d, want 250", got)
	}
	if got := len(f.values[lambdaGroup]["HandlerDuration"]); got != 100 {
		t.Errorf("%d HandlerDuration values, want 100", got)
	}
	// Nothing stale afterwards.
	if f := flush(t, e, &w); len(f.docs) != 0 {
		t.Errorf("next Flush: %d documents", len(f.docs))
	}
}

type failingWriter struct{ n int }

func (fw *failingWriter) Write(p []byte) (int, error) {
	fw.n++
	return 0, errors.New("closed")
}

func TestWriteError(t *testing.T) {
	var fw failingWriter
	e := newLambda(&fw)
	lambdaBatch(e)
	e.Flush(t.Context())
	if fw.n != 1 {
		t.Errorf("%d writes after an error, want 1", fw.n)
	}
	lambdaBatch(e)
	e.Flush(t.Context())
	if fw.n != 2 {
		t.Errorf("the next Flush made %d writes, want 1", fw.n-1)
	}
}

func TestConcurrent(t *testing.T) {
	var w bytes.Buffer
	e := newLambda(&w, emf.WithMaxValues(0))
	const goroutines, each = 32, 500
	f := newFlushed()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				e.OnRecord(observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: fmt.Sprint("shardId-", g%4), Outcome: "retry", Action: observe.ActionCopy, Handled: time.Millisecond, Age: time.Second})
				e.OnWrite(observe.Write{Mode: observe.ModeLambda, Kind: observe.WriteCopy, ShardID: fmt.Sprint("shardId-", g%4), SequenceNumber: fmt.Sprint(i)})
			}
		})
	}
	done := make(chan struct{})
	flushes := make(chan struct{})
	go func() {
		defer close(flushes)
		for {
			select {
			case <-done:
				return
			default:
			}
			e.Flush(t.Context()) // only Flush writes to w, and Flushes are serialized
		}
	}()
	wg.Wait()
	close(done)
	<-flushes
	e.Flush(t.Context())
	f.add(t, w.Bytes(), emf.LineLimit)
	want := int64(goroutines * each)
	if diff := cmp.Diff(map[string]int64{"RecordsHandled": want, "RecordsHandledRetry": want, "Copies": want}, f.counts[lambdaGroup]); diff != "" {
		t.Errorf("counts over all Flushes (-want +got):\n%s", diff)
	}
	if got := len(f.values[lambdaGroup]["HandlerDuration"]); int64(got) != want {
		t.Errorf("%d HandlerDuration values, want %d", got, want)
	}
	cold := 0
	for _, d := range f.docs {
		if _, ok := d.metrics["ColdStart"]; ok {
			cold++
		}
	}
	if cold != 1 {
		t.Errorf("%d ColdStart documents, want 1", cold)
	}
}

// TestNewReadsNoEnvironment: without Environment, the Powertools variables
// change nothing (only cmd/bootstrap reads the environment).
func TestNewReadsNoEnvironment(t *testing.T) {
	t.Setenv("POWERTOOLS_METRICS_NAMESPACE", "Shop")
	t.Setenv("POWERTOOLS_SERVICE_NAME", "svc")
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "fn")
	var w bytes.Buffer
	e := emf.New(&w, emf.WithClock(clock))
	e.OnInvocation(observe.Invocation{Duration: time.Millisecond})
	f := flush(t, e, &w)
	for _, d := range f.docs {
		if d.namespace != emf.DefaultNamespace || d.root["service"] != emf.DefaultService {
			t.Errorf("namespace %q, service %v: New read the environment", d.namespace, d.root["service"])
		}
	}
}

func TestDefaultsFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		env                    map[string]string
		opts                   []emf.Option
		namespace, service, fn string
	}{
		{"none", nil, nil, "lambdaadapter", "lambdaadapter", ""},
		{"function", map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "fn"}, nil, "lambdaadapter", "fn", "fn"},
		{"powertools", map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "fn", "POWERTOOLS_SERVICE_NAME": "svc", "POWERTOOLS_METRICS_NAMESPACE": "Shop"}, nil, "Shop", "svc", "fn"},
		{"invalid namespace ignored", map[string]string{"POWERTOOLS_METRICS_NAMESPACE": "AWS/Lambda"}, nil, "lambdaadapter", "lambdaadapter", ""},
		{"options win", map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "fn", "POWERTOOLS_SERVICE_NAME": "svc", "POWERTOOLS_METRICS_NAMESPACE": "Shop"},
			[]emf.Option{emf.WithNamespace("Other"), emf.WithService(`a "quoted" service`), emf.WithFunctionName("f2")}, "Other", `a "quoted" service`, "f2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			var w bytes.Buffer
			opts := append(emf.Environment(getenv), tc.opts...)
			e := emf.New(&w, append(opts, emf.WithClock(clock))...)
			e.OnInvocation(observe.Invocation{Duration: time.Millisecond})
			f := flush(t, e, &w)
			if len(f.docs) != 2 {
				t.Fatalf("%d documents, want 2", len(f.docs))
			}
			cold, inv := f.docs[0], f.docs[1]
			if cold.namespace != tc.namespace || inv.namespace != tc.namespace {
				t.Errorf("namespace %q, %q, want %q", cold.namespace, inv.namespace, tc.namespace)
			}
			if cold.root["service"] != tc.service || inv.root["service"] != tc.service {
				t.Errorf("service %v, %v, want %q", cold.root["service"], inv.root["service"], tc.service)
			}
			wantDims := [][]string{{"service"}}
			if tc.fn != "" {
				wantDims = [][]string{{"function_name", "service"}}
				if cold.root["function_name"] != tc.fn {
					t.Errorf("function_name %v, want %q", cold.root["function_name"], tc.fn)
				}
			}
			if diff := cmp.Diff(wantDims, cold.dims); diff != "" {
				t.Errorf("ColdStart dimensions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInvalidOptionsPanic(t *testing.T) {
	for name, opt := range map[string]emf.Option{
		"AWS namespace":   emf.WithNamespace("AWS/Kinesis"),
		"empty namespace": emf.WithNamespace(""),
		"empty service":   emf.WithService(""),
		"newline":         emf.WithService("a\nb"),
		"max values":      emf.WithMaxValues(-1),
		"clock":           emf.WithClock(nil),
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "emf: ") {
					t.Errorf("recovered %v, want a panic starting with emf:", r)
				}
			}()
			emf.New(io.Discard, opt)
		})
	}
}

func TestStreamName(t *testing.T) {
	for in, want := range map[string]string{
		"orders": "orders",
		"arn:aws:kinesis:eu-west-1:123456789012:stream/orders":                         "orders",
		"arn:aws:kinesis:eu-west-1:123456789012:stream/orders/consumer/app:1700000000": "orders",
		"arn:aws-cn:kinesis:cn-north-1:123456789012:stream/a.b-c_d":                    "a.b-c_d",
	} {
		var w bytes.Buffer
		e := emf.New(&w, emf.WithService("s"))
		e.OnRecord(observe.Record{Stream: in, Outcome: "ack"})
		f := flush(t, e, &w)
		if len(f.docs) != 1 || f.docs[0].root["Stream"] != want {
			t.Errorf("%s: Stream %v, want %s", in, f.docs[0].root["Stream"], want)
		}
	}
}

func TestOnRecordAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	e := emf.New(io.Discard, emf.WithService("s"), emf.WithRecordAge())
	r := observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: shard0, SequenceNumber: "1", Outcome: "retry", Action: observe.ActionCopy, Handled: time.Millisecond, Age: time.Second}
	w := observe.Write{Mode: observe.ModeLambda, Kind: observe.WriteCopy, ShardID: shard0}
	batch := func() {
		for range 100 {
			e.OnRecord(r)
			e.OnWrite(w)
		}
		e.OnInvocation(observe.Invocation{Records: 100, Duration: time.Second, Stream: arn})
		e.Flush(context.Background())
	}
	batch() // both intervals see the stream and grow their buffers
	batch()
	batch()
	if n := testing.AllocsPerRun(20, batch); n != 0 {
		t.Errorf("%v allocations per invocation of 100 records in steady state, want 0", n)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "orders", `a"b\c`, "\x00\x1f\x7f", "\n\r\t", "é€😀", "\xff\xfe", "a\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := emf.AppendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q encoded as %s: %v", s, b, err)
		}
		if want := string([]rune(s)); got != want {
			t.Errorf("%q encoded as %s decodes to %q, want %q", s, b, got, want)
		}
		if !utf8.Valid(b) {
			t.Errorf("%q encoded as invalid UTF-8 %q", s, b)
		}
	})
}

func BenchmarkOnRecord(b *testing.B) {
	e := emf.New(io.Discard, emf.WithService("s"))
	r := observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: shard0, SequenceNumber: "49590338271490256608559692538361571095921575989136588898", Outcome: "ack", Action: observe.ActionSettled, Handled: 3 * time.Millisecond, Age: time.Second}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e.OnRecord(r)
		if i++; i == 1000 { // a Flush per Lambda batch of 1000 records
			b.StopTimer()
			e.Flush(context.Background())
			i = 0
			b.StartTimer()
		}
	}
}

func BenchmarkOnRecordParallel(b *testing.B) {
	e := emf.New(io.Discard, emf.WithService("s"))
	r := observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: shard0, SequenceNumber: "1", Outcome: "ack", Action: observe.ActionSettled, Handled: 3 * time.Millisecond, Age: time.Second}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e.OnRecord(r)
		}
	})
}

func BenchmarkFlush(b *testing.B) {
	e := emf.New(io.Discard, emf.WithService("s"))
	r := observe.Record{Mode: observe.ModeLambda, Stream: arn, ShardID: shard0, SequenceNumber: "1", Outcome: "ack", Action: observe.ActionSettled, Handled: 3 * time.Millisecond, Age: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		for range 100 {
			e.OnRecord(r)
		}
		e.OnInvocation(observe.Invocation{Records: 100, Duration: time.Second, Stream: arn})
		e.Flush(context.Background())
	}
}
