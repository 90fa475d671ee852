package lambdaadapter_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
	"github.com/shardsettle/lambdaadapter/lease"
)

// modesAck is a handler that acknowledges everything.
var modesAck = lambdaadapter.HandlerFunc(func(context.Context, *lambdaadapter.Message) lambdaadapter.Outcome {
	return lambdaadapter.Ack()
})

// nopDynamo satisfies lease.DynamoDBAPI; New never calls it.
type nopDynamo struct{ lease.DynamoDBAPI }

// modeOnlyOption is an option that belongs to one mode, under the name it
// reports in errors.
type modeOnlyOption struct {
	mode lambdaadapter.Mode
	opt  lambdaadapter.Option
}

// modeOnlyOptions lists every option tagged with its mode (c.only in the
// source). TestModeOptionsMatchSource fails when the source tags an option
// that has no row here, or a row names an option the source does not tag.
func modeOnlyOptions() map[string]modeOnlyOption {
	ecs := func(o lambdaadapter.Option) modeOnlyOption { return modeOnlyOption{lambdaadapter.ModeECS, o} }
	return map[string]modeOnlyOption{
		"WithStream":             ecs(lambdaadapter.WithStream("orders")),
		"WithStreamARN":          ecs(lambdaadapter.WithStreamARN("arn:aws:kinesis:us-east-1:123456789012:stream/orders")),
		"WithLeaseTable":         ecs(lambdaadapter.WithLeaseTable("leases")),
		"WithDynamoDBClient":     ecs(lambdaadapter.WithDynamoDBClient(nopDynamo{})),
		"WithLeaseStore":         ecs(lambdaadapter.WithLeaseStore(lease.NewMemory())),
		"WithOwnerID":            ecs(lambdaadapter.WithOwnerID("worker-1")),
		"WithStartPosition":      ecs(lambdaadapter.WithStartPosition(lambdaadapter.TrimHorizon())),
		"WithGetRecordsLimit":    ecs(lambdaadapter.WithGetRecordsLimit(500)),
		"WithLeaseDuration":      ecs(lambdaadapter.WithLeaseDuration(6 * time.Second)),
		"WithCheckpointInterval": ecs(lambdaadapter.WithCheckpointInterval(2 * time.Second)),
		"WithMetricsInterval":    ecs(lambdaadapter.WithMetricsInterval(30 * time.Second)),
		"WithShutdownTimeout":    ecs(lambdaadapter.WithShutdownTimeout(20 * time.Second)),
		"WithListInterval":       ecs(lambdaadapter.WithListInterval(time.Minute)),
		"WithBatchSize":          ecs(lambdaadapter.WithBatchSize(10)),
		"WithRetryBackoff":       ecs(lambdaadapter.WithRetryBackoff(time.Second, time.Minute)),
		"WithEnhancedFanOut":     ecs(lambdaadapter.WithEnhancedFanOut("orders-app")),
		"WithDeadlineMargin":     {lambdaadapter.ModeLambda, lambdaadapter.WithDeadlineMargin(300 * time.Millisecond)},
	}
}

// bothModeOptions are the exported options that apply in either mode (not
// tagged). Every exported function returning Option is in exactly one of
// this list and modeOnlyOptions, so a new option has to be classified.
var bothModeOptions = []string{
	"WithMode", "OnlyIn", "WithConcurrency", "WithLogger", "WithLogLevel", "WithMaxAttempts",
	"WithDeadLetterStream", "WithDeadLetterQueue", "WithDeadLetterDrops", "WithDelayQueue",
	"WithMaxInProcessDelay", "WithReplyStream", "WithReplyPartitionKey", "WithKinesisClient",
	"WithSQSClient", "WithMaxMessageSize", "WithHooks", "WithMaxRecordAge", "WithRecycledMessages",
}

// modeBase returns the options an adapter of mode m needs to build without
// AWS: fake clients and, in long-running mode, a stream.
func modeBase(m lambdaadapter.Mode) []lambdaadapter.Option {
	k := lambdaadapter.WithKinesisClient(fanOutFake{awsfake.NewKinesis()}) // fanOutFake: modes_efo_test.go
	if m == lambdaadapter.ModeECS {
		return []lambdaadapter.Option{
			lambdaadapter.WithMode(lambdaadapter.ModeECS), k,
			lambdaadapter.WithStream("orders"), lambdaadapter.WithDynamoDBClient(nopDynamo{}),
		}
	}
	return []lambdaadapter.Option{k}
}

func otherMode(m lambdaadapter.Mode) lambdaadapter.Mode {
	if m == lambdaadapter.ModeECS {
		return lambdaadapter.ModeLambda
	}
	return lambdaadapter.ModeECS
}

// modeDescription is how the wrong-mode error names the mode an option
// belongs to.
func modeDescription(m lambdaadapter.Mode) string {
	if m == lambdaadapter.ModeECS {
		return "long-running mode (WithMode(ModeECS))"
	}
	return "Lambda mode"
}

// checkWrongMode checks err is the error of New for the options names,
// which belong to mode belongs, given to an adapter of mode runs. There is
// no sentinel error for this (nothing to match with errors.Is), so the
// message is checked.
func checkWrongMode(t *testing.T, err error, belongs, runs lambdaadapter.Mode, names ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s in %s mode: accepted, want an error", strings.Join(names, ", "), runs)
	}
	msg := err.Error()
	want := fmt.Sprintf("lambdaadapter: %s belongs to %s, but this adapter runs in %s mode",
		strings.Join(names, ", "), modeDescription(belongs), runs)
	if !strings.HasPrefix(msg, want) {
		t.Errorf("error %q\nwant it to start %q", msg, want)
	}
	if !errors.Is(err, lambdaadapter.ErrWrongMode) {
		t.Errorf("error %q does not match ErrWrongMode", msg)
	}
	if !strings.Contains(msg, "OnlyIn") {
		t.Errorf("error %q does not point to OnlyIn", msg)
	}
}

func TestWithLeaseTableInLambdaMode(t *testing.T) {
	_, err := lambdaadapter.New(modesAck, lambdaadapter.WithKinesisClient(awsfake.NewKinesis()), lambdaadapter.WithLeaseTable("t"))
	checkWrongMode(t, err, lambdaadapter.ModeECS, lambdaadapter.ModeLambda, "WithLeaseTable")
}

func TestWithDeadlineMarginInECSMode(t *testing.T) {
	_, err := lambdaadapter.New(modesAck, lambdaadapter.WithMode(lambdaadapter.ModeECS), lambdaadapter.WithStream("orders"),
		lambdaadapter.WithKinesisClient(awsfake.NewKinesis()), lambdaadapter.WithDeadlineMargin(time.Second))
	checkWrongMode(t, err, lambdaadapter.ModeLambda, lambdaadapter.ModeECS, "WithDeadlineMargin")
	// NewBatch implies long-running mode.
	bh := lambdaadapter.BatchHandlerFunc(func(context.Context, []*lambdaadapter.Message) []lambdaadapter.Outcome { return nil })
	_, err = lambdaadapter.NewBatch(bh, lambdaadapter.WithStream("orders"),
		lambdaadapter.WithKinesisClient(awsfake.NewKinesis()), lambdaadapter.WithDeadlineMargin(time.Second))
	checkWrongMode(t, err, lambdaadapter.ModeLambda, lambdaadapter.ModeECS, "WithDeadlineMargin")
}

// TestModeOptions: every option of one mode is accepted in its mode and an
// error naming it (and its mode) in the other; wrapped in OnlyIn for its
// own mode it is ignored in the other, and OnlyIn for the other mode does
// not make it acceptable there.
func TestModeOptions(t *testing.T) {
	for name, row := range modeOnlyOptions() {
		t.Run(name, func(t *testing.T) {
			own, other := row.mode, otherMode(row.mode)
			if _, err := lambdaadapter.New(modesAck, append(modeBase(own), row.opt)...); err != nil {
				t.Errorf("in its own mode (%s): %v", own, err)
			}
			_, err := lambdaadapter.New(modesAck, append(modeBase(other), row.opt)...)
			checkWrongMode(t, err, own, other, name)
			if _, err := lambdaadapter.New(modesAck, append(modeBase(other), lambdaadapter.OnlyIn(own, row.opt))...); err != nil {
				t.Errorf("OnlyIn(%s, %s) in %s mode: %v, want it ignored", own, name, other, err)
			}
			if _, err := lambdaadapter.New(modesAck, append(modeBase(own), lambdaadapter.OnlyIn(own, row.opt))...); err != nil {
				t.Errorf("OnlyIn(%s, %s) in its own mode: %v", own, name, err)
			}
			_, err = lambdaadapter.New(modesAck, append(modeBase(other), lambdaadapter.OnlyIn(other, row.opt))...)
			checkWrongMode(t, err, own, other, name)
		})
	}
}

func TestOnlyInIgnoresTheOtherMode(t *testing.T) {
	k := awsfake.NewKinesis()
	ecs := []lambdaadapter.Option{
		lambdaadapter.WithMode(lambdaadapter.ModeECS), lambdaadapter.WithStream("orders"), lambdaadapter.WithKinesisClient(k),
	}
	if _, err := lambdaadapter.New(modesAck, lambdaadapter.WithKinesisClient(k), lambdaadapter.OnlyIn(lambdaadapter.ModeECS, lambdaadapter.WithLeaseTable("t"))); err != nil {
		t.Errorf("OnlyIn(ModeECS, WithLeaseTable) in Lambda mode: %v", err)
	}
	if _, err := lambdaadapter.New(modesAck, append(ecs, lambdaadapter.OnlyIn(lambdaadapter.ModeLambda, lambdaadapter.WithDeadlineMargin(time.Second)))...); err != nil {
		t.Errorf("OnlyIn(ModeLambda, WithDeadlineMargin) in ECS mode: %v", err)
	}
	// Ignored means not applied at all: an invalid value is not even
	// looked at in the other mode, and is an error in its own.
	if _, err := lambdaadapter.New(modesAck, append(ecs, lambdaadapter.OnlyIn(lambdaadapter.ModeLambda, lambdaadapter.WithDeadlineMargin(0)))...); err != nil {
		t.Errorf("OnlyIn(ModeLambda, WithDeadlineMargin(0)) in ECS mode: %v, want it ignored", err)
	}
	if _, err := lambdaadapter.New(modesAck, lambdaadapter.WithKinesisClient(k), lambdaadapter.OnlyIn(lambdaadapter.ModeLambda, lambdaadapter.WithDeadlineMargin(0))); err == nil {
		t.Error("OnlyIn(ModeLambda, WithDeadlineMargin(0)) in Lambda mode accepted: OnlyIn did not apply it")
	}
	if _, err := lambdaadapter.New(modesAck, lambdaadapter.WithKinesisClient(k), lambdaadapter.OnlyIn(lambdaadapter.ModeECS, lambdaadapter.WithRetryBackoff(0, 0))); err != nil {
		t.Errorf("OnlyIn(ModeECS, WithRetryBackoff(0, 0)) in Lambda mode: %v, want it ignored", err)
	}
	if _, err := lambdaadapter.New(modesAck, append(ecs, lambdaadapter.OnlyIn(lambdaadapter.ModeECS, lambdaadapter.WithRetryBackoff(0, 0)))...); err == nil {
		t.Error("OnlyIn(ModeECS, WithRetryBackoff(0, 0)) in ECS mode accepted: OnlyIn did not apply it")
	}
	// The mode is the one in force after every option, wherever WithMode
	// comes.
	if _, err := lambdaadapter.New(modesAck, lambdaadapter.WithLeaseTable("t"), lambdaadapter.WithDynamoDBClient(nopDynamo{}),
		lambdaadapter.WithStream("orders"), lambdaadapter.WithKinesisClient(k), lambdaadapter.WithMode(lambdaadapter.ModeECS)); err != nil {
		t.Errorf("ECS options before WithMode(ModeECS): %v", err)
	}
	// Several options of the wrong mode are named once each, in order.
	_, err := lambdaadapter.New(modesAck, lambdaadapter.WithKinesisClient(k), lambdaadapter.WithStream("a"),
		lambdaadapter.WithLeaseTable("t"), lambdaadapter.WithStream("b"))
	checkWrongMode(t, err, lambdaadapter.ModeECS, lambdaadapter.ModeLambda, "WithStream", "WithLeaseTable")
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

// TestModeOptionsMatchSource reads the tags (c.only(mode, "Name")) in the
// source: each names the option it is in; the table above lists exactly the
// tagged options, with their modes; every exported option is either tagged
// or listed as applying in both modes; and each one's documentation says
// "(long-running mode only)" or "(Lambda mode only)" exactly when it is
// tagged.
func TestModeOptionsMatchSource(t *testing.T) {
	fset, files := rootSource(t)
	rows := modeOnlyOptions()
	tagged := map[string]string{}  // option name -> mode constant
	options := map[string]string{} // exported option -> its doc
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			isOption := fn.Name.IsExported() && returnsOnly(fn, "Option")
			if isOption {
				options[fn.Name.Name] = fn.Doc.Text()
			}
			if fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "only" {
					return true
				}
				at := fset.Position(call.Pos())
				if len(call.Args) != 2 {
					t.Errorf("%s: only with %d arguments", at, len(call.Args))
					return true
				}
				mode, ok := call.Args[0].(*ast.Ident)
				lit, ok2 := call.Args[1].(*ast.BasicLit)
				if !ok || !ok2 || lit.Kind != token.STRING {
					t.Errorf("%s: only(%T, %T): the test reads a mode constant and a string literal", at, call.Args[0], call.Args[1])
					return true
				}
				name, _ := strconv.Unquote(lit.Value)
				switch {
				case !isOption:
					t.Errorf("%s: %s tags %q but is not an exported option", at, fn.Name.Name, name)
				case name != fn.Name.Name:
					t.Errorf("%s: %s tags itself as %q: errors would name the wrong option", at, fn.Name.Name, name)
				case tagged[name] != "":
					t.Errorf("%s: %s tagged twice", at, name)
				}
				tagged[name] = mode.Name
				return true
			})
		}
	}
	if len(tagged) == 0 || len(options) == 0 {
		t.Fatalf("found %d tagged options and %d options in the source: the test no longer reads it", len(tagged), len(options))
	}
	modeConst := map[lambdaadapter.Mode]string{lambdaadapter.ModeECS: "ModeECS", lambdaadapter.ModeLambda: "ModeLambda"}
	for name, mode := range tagged {
		row, ok := rows[name]
		switch {
		case !ok:
			t.Errorf("%s is tagged %s in the source but has no row in modeOnlyOptions", name, mode)
		case modeConst[row.mode] != mode:
			t.Errorf("%s is tagged %s in the source, its row says %s", name, mode, modeConst[row.mode])
		}
	}
	for name := range rows {
		if _, ok := tagged[name]; !ok {
			t.Errorf("modeOnlyOptions has %s, which the source does not tag with a mode", name)
		}
	}
	for _, name := range bothModeOptions {
		if _, ok := tagged[name]; ok {
			t.Errorf("%s is listed as applying in both modes but is tagged %s", name, tagged[name])
		}
		if _, ok := options[name]; !ok {
			t.Errorf("bothModeOptions has %s, which is not an exported option", name)
		}
	}
	docWants := map[string]string{"ModeECS": "(long-running mode only)", "ModeLambda": "(Lambda mode only)"}
	for name, doc := range options {
		mode, isTagged := tagged[name]
		if !isTagged && !slices.Contains(bothModeOptions, name) {
			t.Errorf("option %s is neither tagged with a mode (c.only) nor listed in bothModeOptions: classify it", name)
		}
		doc = strings.Join(strings.Fields(doc), " ")
		switch {
		case isTagged && !strings.Contains(doc, docWants[mode]):
			t.Errorf("%s is tagged %s but its documentation does not say %q", name, mode, docWants[mode])
		case !isTagged && strings.Contains(doc, "mode only)"):
			t.Errorf("%s is documented as belonging to one mode but is not tagged with it: it is accepted in both", name)
		}
	}
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
	a, err := lambdaadapter.New(h,
		lambdaadapter.WithMode(lambdaadapter.ModeECS), lambdaadapter.WithStream(stream),
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
