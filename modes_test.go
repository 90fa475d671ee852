package lambdaadapter_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.uber.org/goleak"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// modesAck is a handler that acknowledges everything.
var modesAck = lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
	return lambdaadapter.Ack()
})

// optionDoors lists every exported option by the doors it fits: "function"
// (NewFunction only), "service" (NewService only), "shared" (both) or
// "handle" (Handle only). TestOptionDoorsMatchSource fails when an option
// has no row or its row and its declared type disagree.
func optionDoors() map[string]struct {
	door string
	opt  lambdaadapter.Option
} {
	type row = struct {
		door string
		opt  lambdaadapter.Option
	}
	svc := func(o lambdaadapter.ServiceOption) row { return row{"service", o} }
	shared := func(o lambdaadapter.SharedOption) row { return row{"shared", o} }
	return map[string]row{
		"WithStream":             svc(lambdaadapter.WithStream("orders")),
		"WithStreamARN":          svc(lambdaadapter.WithStreamARN("arn:aws:kinesis:us-east-1:123456789012:stream/orders")),
		"WithStreams":            svc(lambdaadapter.WithStreams("payments")),
		"WithStreamHandler":      svc(lambdaadapter.WithStreamHandler("payments", modesAck)),
		"WithLeaseTable":         svc(lambdaadapter.WithLeaseTable("leases")),
		"WithDynamoDBClient":     svc(lambdaadapter.WithDynamoDBClient(nopDynamo{})),
		"WithLeaseStore":         svc(lambdaadapter.WithLeaseStore(lease.NewMemory())),
		"WithOwnerID":            svc(lambdaadapter.WithOwnerID("worker-1")),
		"WithStartPosition":      svc(lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon())),
		"WithGetRecordsLimit":    svc(lambdaadapter.WithGetRecordsLimit(500)),
		"WithLeaseDuration":      svc(lambdaadapter.WithLeaseDuration(6 * time.Second)),
		"WithCheckpointInterval": svc(lambdaadapter.WithCheckpointInterval(2 * time.Second)),
		"WithMetricsInterval":    svc(lambdaadapter.WithMetricsInterval(30 * time.Second)),
		"WithShutdownTimeout":    svc(lambdaadapter.WithShutdownTimeout(20 * time.Second)),
		"WithListInterval":       svc(lambdaadapter.WithListInterval(time.Minute)),
		"WithBalanceByCount":     svc(lambdaadapter.WithBalanceByCount()),
		"WithBatchSize":          svc(lambdaadapter.WithBatchSize(10)),
		"WithRetryBackoff":       svc(lambdaadapter.WithRetryBackoff(time.Second, time.Minute)),
		"WithEnhancedFanOut":     svc(lambdaadapter.WithEnhancedFanOut("orders-app")),
		"WithDeadlineMargin":     {"function", lambdaadapter.WithDeadlineMargin(300 * time.Millisecond)},
		"WithMode":               {"handle", lambdaadapter.WithMode(lambdaadapter.ModeECS)},
		"OnlyIn":                 {"handle", lambdaadapter.OnlyIn(lambdaadapter.ModeECS)},
		"WithAWSConfig":          shared(lambdaadapter.WithAWSConfig(aws.Config{Region: "us-east-1"})),
		"WithKinesisClient":      shared(lambdaadapter.WithKinesisClient(fanOutFake{awsfake.NewKinesis()})),
		"WithSQSClient":          shared(lambdaadapter.WithSQSClient(awsfake.NewSQS())),
		"WithConcurrency":        shared(lambdaadapter.WithConcurrency(4)),
		"WithLogger":             shared(lambdaadapter.WithLogger(nil)),
		"WithLogLevel":           shared(lambdaadapter.WithLogLevel(slog.LevelError)),
		"WithMaxAttempts":        shared(lambdaadapter.WithMaxAttempts(3)),
		"WithDeadLetterStream":   shared(lambdaadapter.WithDeadLetterStream("dead")),
		"WithDeadLetterQueue":    shared(lambdaadapter.WithDeadLetterQueue("https://sqs.us-east-1.amazonaws.com/1/dead")),
		"WithDeadLetterDrops":    shared(lambdaadapter.WithDeadLetterDrops()),
		"WithDelayQueue":         shared(lambdaadapter.WithDelayQueue("https://sqs.us-east-1.amazonaws.com/1/delays")),
		"WithMaxInProcessDelay":  shared(lambdaadapter.WithMaxInProcessDelay(time.Second)),
		"WithReplyStream":        shared(lambdaadapter.WithReplyStream("replies")),
		"WithReplyPartitionKey":  shared(lambdaadapter.WithReplyPartitionKey("k")),
		"WithMaxMessageSize":     shared(lambdaadapter.WithMaxMessageSize(1 << 10)),
		"WithHooks":              shared(lambdaadapter.WithHooks()),
		"WithMaxRecordAge":       shared(lambdaadapter.WithMaxRecordAge(time.Hour)),
		"WithRecycledMessages":   shared(lambdaadapter.WithRecycledMessages()),
	}
}

// nopDynamo satisfies lease.DynamoDBAPI; the constructors never call it.
type nopDynamo struct{ lease.DynamoDBAPI }

// doorTypes are the declared option types, by door.
var doorTypes = map[string]string{"function": "FunctionOption", "service": "ServiceOption", "shared": "SharedOption", "handle": "Option"}

// TestOptionDoorsMatchSource: every exported function of the root package
// that returns an option is in optionDoors, declared with the type of its
// door; and the types do what the doors promise: an option of one door
// does not convert to the other's option type (so passing it there does
// not compile), a shared one converts to both, Handle's own to neither.
func TestOptionDoorsMatchSource(t *testing.T) {
	_, files := rootSource(t)
	rows := optionDoors()
	seen := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			for door, typ := range doorTypes {
				if !returnsOnly(fn, typ) {
					continue
				}
				seen[fn.Name.Name] = true
				row, ok := rows[fn.Name.Name]
				switch {
				case !ok:
					t.Errorf("%s returns %s but has no row in optionDoors", fn.Name.Name, typ)
				case row.door != door:
					t.Errorf("%s returns %s (door %s), its row says %s", fn.Name.Name, typ, door, row.door)
				}
			}
		}
	}
	for name := range rows {
		if !seen[name] {
			t.Errorf("optionDoors has %s, which is not an exported option of the source", name)
		}
	}
	fnType := reflect.TypeFor[lambdaadapter.FunctionOption]()
	svcType := reflect.TypeFor[lambdaadapter.ServiceOption]()
	for name, fn := range map[string]any{
		"WithDeadlineMargin": lambdaadapter.WithDeadlineMargin, "WithStream": lambdaadapter.WithStream,
		"WithConcurrency": lambdaadapter.WithConcurrency, "WithMode": lambdaadapter.WithMode,
	} {
		out := reflect.TypeOf(fn).Out(0)
		want := map[string][2]bool{"function": {true, false}, "service": {false, true}, "shared": {true, true}, "handle": {false, false}}[rows[name].door]
		if got := [2]bool{out.Implements(fnType), out.Implements(svcType)}; got != want {
			t.Errorf("%s returns %v: converts to FunctionOption, ServiceOption = %v, want %v", name, out, got, want)
		}
	}
}

// TestOptionsInTheirDoor: every option builds in each door it fits (with
// the clients and stream a door needs), so the rows above are real values.
func TestOptionsInTheirDoor(t *testing.T) {
	k := lambdaadapter.WithKinesisClient(fanOutFake{awsfake.NewKinesis()})
	sqsClient := lambdaadapter.WithSQSClient(awsfake.NewSQS())
	for name, row := range optionDoors() {
		var extra []lambdaadapter.SharedOption
		if name == "WithDeadLetterDrops" {
			extra = append(extra, lambdaadapter.WithDeadLetterStream("dead")) // it needs a target
		}
		if o, ok := row.opt.(lambdaadapter.FunctionOption); ok {
			fopts := []lambdaadapter.FunctionOption{k, sqsClient, o}
			for _, x := range extra {
				fopts = append(fopts, x)
			}
			if _, err := lambdaadapter.NewFunction(modesAck, fopts...); err != nil {
				t.Errorf("NewFunction with %s: %v", name, err)
			}
		}
		if o, ok := row.opt.(lambdaadapter.ServiceOption); ok {
			base := []lambdaadapter.ServiceOption{k, sqsClient, lambdaadapter.WithStream("orders"), lambdaadapter.WithDynamoDBClient(nopDynamo{})}
			if name == "WithLeaseStore" {
				base = base[:3]
			}
			for _, x := range extra {
				base = append(base, x)
			}
			if _, err := lambdaadapter.NewService(modesAck, append(base, o)...); err != nil {
				t.Errorf("NewService with %s: %v", name, err)
			}
		}
	}
}

// rootSource parses the root package's non-test files.
func rootSource(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	return parseDir(t, ".")
}

func parseDir(t *testing.T, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return fset, files
}

// returnsOnly reports whether fn is a plain function with one result, of
// the named type.
func returnsOnly(fn *ast.FuncDecl, typ string) bool {
	if fn.Recv != nil || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 || len(fn.Type.Results.List[0].Names) > 1 {
		return false
	}
	id, ok := fn.Type.Results.List[0].Type.(*ast.Ident)
	return ok && id.Name == typ
}

// aliasDoc returns the documentation of the type name declared in files.
func aliasDoc(t *testing.T, files []*ast.File, name string) string {
	t.Helper()
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				if ts.Name.Name != name {
					continue
				}
				if ts.Doc != nil {
					return ts.Doc.Text()
				}
				if len(gd.Specs) == 1 {
					return gd.Doc.Text()
				}
				return ""
			}
		}
	}
	t.Fatalf("type %s not found", name)
	return ""
}

// messageMembers returns the exported fields and methods of
// internal/message's Message, in declaration order.
func messageMembers(t *testing.T) (fields, methods []string) {
	t.Helper()
	_, files := parseDir(t, filepath.Join("internal", "message"))
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || ts.Name.Name != "Message" {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						t.Fatalf("message.Message is a %T, not a struct", ts.Type)
					}
					for _, fl := range st.Fields.List {
						names := fl.Names
						if len(names) == 0 { // embedded: the type's name
							typ := fl.Type
							if star, ok := typ.(*ast.StarExpr); ok {
								typ = star.X
							}
							switch x := typ.(type) {
							case *ast.Ident:
								names = []*ast.Ident{x}
							case *ast.SelectorExpr:
								names = []*ast.Ident{x.Sel}
							}
						}
						for _, n := range names {
							if n.IsExported() {
								fields = append(fields, n.Name)
							}
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) != 1 || !d.Name.IsExported() {
					continue
				}
				typ := d.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if id, ok := typ.(*ast.Ident); ok && id.Name == "Message" {
					methods = append(methods, d.Name.Name)
				}
			}
		}
	}
	if len(fields) == 0 {
		t.Fatal("message.Message: no exported fields found")
	}
	return fields, methods
}

// docFieldLine is a field line of the table in the Message documentation:
// a tab, then the field name.
var docFieldLine = regexp.MustCompile(`(?m)^\t([A-Z][A-Za-z0-9_]*)\s`)

// messageDocGaps returns what doc lacks (fields of the table, methods
// mentioned as Name(...)) and the table's fields Message does not have.
func messageDocGaps(doc string, fields, methods []string) (missing, stale []string) {
	var listed []string
	for _, m := range docFieldLine.FindAllStringSubmatch(doc, -1) {
		listed = append(listed, m[1])
	}
	for _, f := range fields {
		if !slices.Contains(listed, f) {
			missing = append(missing, "field "+f)
		}
	}
	for _, m := range methods {
		if !regexp.MustCompile(`\b` + m + `\(`).MatchString(doc) {
			missing = append(missing, "method "+m)
		}
	}
	for _, l := range listed {
		if !slices.Contains(fields, l) {
			stale = append(stale, l)
		}
	}
	return missing, stale
}

// TestMessageDocListsMembers: the root Message alias documents message.
// Message's fields in a table (one line each, starting with the name) and
// its methods; godoc shows users only that text, so it must name every
// exported field and method, and nothing Message does not have.
func TestMessageDocListsMembers(t *testing.T) {
	_, files := rootSource(t)
	doc := aliasDoc(t, files, "Message")
	fields, methods := messageMembers(t)
	missing, stale := messageDocGaps(doc, fields, methods)
	for _, m := range missing {
		t.Errorf("the Message documentation (adapter.go) does not list %s of internal/message.Message", m)
	}
	for _, s := range stale {
		t.Errorf("the Message documentation (adapter.go) lists a field %s that internal/message.Message does not have", s)
	}
	// The check itself finds a field left out.
	if missing, _ := messageDocGaps(strings.Replace(doc, "\t"+fields[0]+" ", "\tX ", 1), fields, methods); !slices.Contains(missing, "field "+fields[0]) {
		t.Errorf("a documentation without %s passes the check", fields[0])
	}
}

// TestOutcomeDocListsConstructors: every constructor of message.Outcome is
// re-exported by the root package and named in the root Outcome's
// documentation.
func TestOutcomeDocListsConstructors(t *testing.T) {
	_, files := rootSource(t)
	doc := aliasDoc(t, files, "Outcome")
	rootFuncs := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && returnsOnly(fn, "Outcome") {
				rootFuncs[fn.Name.Name] = true
			}
		}
	}
	_, msgFiles := parseDir(t, filepath.Join("internal", "message"))
	var ctors []string
	for _, f := range msgFiles {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.IsExported() && returnsOnly(fn, "Outcome") {
				ctors = append(ctors, fn.Name.Name)
			}
		}
	}
	if len(ctors) < 4 {
		t.Fatalf("found constructors %v in internal/message: the test no longer reads it", ctors)
	}
	for _, c := range ctors {
		if !rootFuncs[c] {
			t.Errorf("the root package does not re-export message.%s", c)
		}
		if !regexp.MustCompile(`\b` + c + `\b`).MatchString(doc) {
			t.Errorf("the Outcome documentation (adapter.go) does not name %s", c)
		}
	}
}

// TestRunLeavesNoGoroutines: a long-running adapter stopped while a
// RetryAfter copy and a Retry backoff are pending leaves no goroutine
// behind once Run returned. It runs in real time (a synctest bubble would
// hide leaks from goleak: synctest.Test itself waits for the bubble's
// goroutines), waiting on conditions, not fixed sleeps.
func TestRunLeavesNoGoroutines(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	const stream = "orders"
	k := awsfake.NewKinesis()
	k.CreateStream(stream, 2)
	const acks = 6
	for i := range acks {
		k.Put(stream, "key-"+strconv.Itoa(i), []byte("ack"))
	}
	k.Put(stream, "later", []byte("retry-after"))
	k.Put(stream, "again", []byte("retry"))

	var retryAfters, retries, acked atomic.Int32
	h := lambdaadapter.HandlerFunc(func(_ context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
		switch string(m.Payload) {
		case "retry-after": // every copy of it asks again: one is always pending
			retryAfters.Add(1)
			return lambdaadapter.RetryAfter(2*time.Second, errors.New("not yet"))
		case "retry":
			retries.Add(1)
			return lambdaadapter.Retry(errors.New("downstream 503"))
		}
		acked.Add(1)
		return lambdaadapter.Ack()
	})
	a, err := lambdaadapter.NewService(h,
		lambdaadapter.WithStream(stream),
		lambdaadapter.WithKinesisClient(k), lambdaadapter.WithLeaseStore(lease.NewMemory()),
		lambdaadapter.WithOwnerID("leak-check"), lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon()),
		lambdaadapter.WithLeaseDuration(3*time.Second), lambdaadapter.WithListInterval(time.Second),
		lambdaadapter.WithCheckpointInterval(100*time.Millisecond),
		// The Retry waits 30s to 1m for its redelivery: still waiting at the stop.
		lambdaadapter.WithRetryBackoff(time.Minute, time.Minute),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	deadline := time.After(time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for retryAfters.Load() < 1 || retries.Load() < 1 || acked.Load() < acks {
		select {
		case err := <-done:
			t.Fatalf("Run returned before the stop: %v", err)
		case <-deadline:
			t.Fatalf("after a minute: %d retry-after, %d retry, %d of %d acks handled", retryAfters.Load(), retries.Load(), acked.Load(), acks)
		case <-tick.C:
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of the stop")
	}
	goleak.VerifyNone(t, ignore)
}
