package deploy

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/cloudformation/kinesis"
)

// Enhanced fan-out (parameter FanOutConsumerName). Both modes: the stack
// registers the stream consumer (AWS::Kinesis::StreamConsumer), so deleting
// the stack deregisters it. Lambda mode maps the function to its ARN; the
// role lets the event source describe it and subscribe to its shards.
// Long-running mode: LAMBDAADAPTER_EFO_CONSUMER from the stack's consumer,
// and the task role may make the calls of consumer/efo.go - describe the
// consumer and subscribe to its shards, and register it again on the stream
// if it was deleted outside the stack - and no longer GetRecords. Polling stacks get none of it (TestIAMGrants checks
// every grant exactly).

// efoSource is where the long-running mode reads with enhanced fan-out.
const efoSource = "../internal/consumer/efo.go"

func TestFanOut(t *testing.T) {
	for _, base := range []map[string]string{lambdaMode(), ecsMode()} {
		for _, stream := range []string{"", existingStreamARN} {
			for _, name := range []string{"", fanOutName} {
				p := params(base, "StreamArn", stream, "FanOutConsumerName", name)
				s := evaluate(t, p)
				mode := s.Params["Mode"].(string)
				at := describe(p)
				env := modeEnv(t, s)
				consumers := idsOfType(s, "AWS::Kinesis::StreamConsumer")
				got, set := env["LAMBDAADAPTER_EFO_CONSUMER"]
				_, output := s.Outputs["FanOutConsumerArn"]
				arn := "${" + fanOutConsumerID + ".ConsumerARN}"
				// Both modes: the stack registers the consumer (and
				// deregisters it with the stack, ending its charges).
				if name == "" {
					if len(consumers) != 0 || output {
						t.Errorf("%s: stream consumers %q, output %v without FanOutConsumerName", at, consumers, output)
					}
				} else {
					if !slices.Equal(consumers, []string{fanOutConsumerID}) {
						t.Fatalf("%s: stream consumers %q, want %s", at, consumers, fanOutConsumerID)
					}
					c := &kinesis.StreamConsumer{}
					if err := s.Decode(fanOutConsumerID, c); err != nil {
						t.Fatal(err)
					}
					if c.ConsumerName != name || c.StreamARN != sourceStream(p) {
						t.Errorf("%s: consumer %q of %q, want %q of the source stream %q", at, c.ConsumerName, c.StreamARN, name, sourceStream(p))
					}
					if s.Outputs["FanOutConsumerArn"] != arn {
						t.Errorf("%s: output FanOutConsumerArn %v, want the consumer's ARN %s", at, s.Outputs["FanOutConsumerArn"], arn)
					}
				}
				if mode == "ecs" {
					// The tasks get the name from the stack's consumer (so
					// they start only once it is registered: a task that
					// registered it first would fail the stack's
					// registration) and find it by name on the stream
					// whose ARN they are given.
					want := ""
					if name != "" {
						want = "${" + fanOutConsumerID + ".ConsumerName}"
					}
					if got != want || set != (name != "") {
						t.Errorf("%s: LAMBDAADAPTER_EFO_CONSUMER = %q (set %v), want %q", at, got, set, want)
					}
					if name != "" && env["LAMBDAADAPTER_STREAM_ARN"] != sourceStream(p) {
						t.Errorf("%s: LAMBDAADAPTER_STREAM_ARN = %q: enhanced fan-out needs the stream's ARN", at, env["LAMBDAADAPTER_STREAM_ARN"])
					}
					continue
				}
				if set {
					t.Errorf("%s: LAMBDAADAPTER_EFO_CONSUMER is set in lambda mode (an error at New)", at)
				}
				_, _, events := function(t, s)
				ks := eventsOfType(events, "Kinesis")
				if len(ks) != 1 {
					t.Fatalf("%s: %d Kinesis events", at, len(ks))
				}
				source := deref(ks[0].Mapping.EventSourceArn)
				if name == "" {
					if source != sourceStream(p) {
						t.Errorf("%s: event source %q; want the stream", at, source)
					}
					continue
				}
				if source != arn {
					t.Errorf("%s: event source %q; want the consumer's ARN %s", at, source, arn)
				}
				// The adapter gets eventSourceARN = the consumer's ARN and
				// derives the stream's from it: the ARN must be of the
				// stream the adapter writes its copies to.
				if got := concreteARN(t, s, arn); !strings.HasPrefix(got, concreteARN(t, s, sourceStream(p))+"/consumer/"+name+":") {
					t.Errorf("%s: consumer ARN %q is not one of the source stream's", at, got)
				}
			}
		}
	}
}

// TestFanOutGrantsOnlyWithTheParameter checks, in every combination, that
// no role may make a call of the other way of reading: fan-out calls only
// with FanOutConsumerName, and the task role's GetRecords only without.
func TestFanOutGrantsOnlyWithTheParameter(t *testing.T) {
	fanOutActions := map[string]bool{}
	for key, r := range readingOnly {
		if r == fanOut {
			fanOutActions[strings.Replace(key[strings.LastIndex(key, " ")+1:], ".", ":", 1)] = true
		}
	}
	eachCombination(t, func(c combination) {
		s := evaluate(t, c.params)
		for role, sts := range policyStatements(t, s) {
			for _, st := range sts {
				for _, a := range st.Action {
					switch {
					case fanOutActions[a] && reading(c.params) != fanOut:
						t.Errorf("%s: %s may %s without FanOutConsumerName", c.name, role, a)
					case a == "kinesis:GetRecords" && role == "TaskRole" && reading(c.params) == fanOut:
						t.Errorf("%s: the task role may GetRecords, but the tasks read with enhanced fan-out", c.name)
					}
				}
			}
		}
	})
	if len(fanOutActions) != 3 {
		t.Errorf("fan-out actions %v, want DescribeStreamConsumer, RegisterStreamConsumer, SubscribeToShard", fanOutActions)
	}
}

// TestReadingOnlyMatchesTheCode checks readingOnly against the rows it
// names and against the code: the polling calls are made only by
// consumer's fetch, the fan-out calls only in efo.go, which reads with
// subscribe when a consumer name is set and with fetch otherwise.
func TestReadingOnlyMatchesTheCode(t *testing.T) {
	ops := map[string]bool{}
	for _, c := range adapterCalls {
		ops[c.op] = true
	}
	for _, c := range serviceCalls {
		ops[c.role+" "+c.action] = true
	}
	for key := range readingOnly {
		if !ops[key] {
			t.Errorf("readingOnly names %q, which is neither an op of adapterCalls nor a role and action of serviceCalls", key)
		}
	}
	// Where each method of readingOnly is called: file and function.
	calls := map[string][]string{}
	fset := token.NewFileSet()
	files, err := filepath.Glob("../internal/consumer/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := goparser.ParseFile(fset, path, nil, goparser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					if _, listed := readingOnly["kinesis."+sel.Sel.Name]; listed {
						calls[sel.Sel.Name] = append(calls[sel.Sel.Name], filepath.Base(path)+" "+fd.Name.Name)
					}
				}
				return true
			})
		}
	}
	for key, r := range readingOnly {
		op, ok := strings.CutPrefix(key, "kinesis.")
		if !ok {
			continue
		}
		if len(calls[op]) == 0 {
			t.Errorf("consumer/ no longer calls %s; update readingOnly", op)
		}
		for _, where := range calls[op] {
			if r == polling && where != "reader.go fetch" || r == fanOut && !strings.HasPrefix(where, "efo.go ") {
				t.Errorf("%s is called in %s, but readingOnly says %s only: update it (and the template's grants)", op, where, r)
			}
		}
	}
	src, err := os.ReadFile(efoSource)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`if s\.c\.fan != nil \{\s*return s\.subscribe\s*\}\s*return s\.fetch`).Match(src) {
		t.Errorf("%s: shard.source no longer chooses subscribe with fan-out and fetch otherwise; update readingOnly and this test", efoSource)
	}
}

// TestFanOutConsumerNameParameter checks the parameter's constraint
// against the names consumer/efo.go accepts (consumerName), so that a
// stack never deploys a name the tasks refuse at start.
func TestFanOutConsumerNameParameter(t *testing.T) {
	src, err := os.ReadFile(efoSource)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("consumerName = regexp.MustCompile\\(`([^`]+)`\\)").FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s no longer has the regexp consumerName; update this test", efoSource)
	}
	code := regexp.MustCompile(string(m[1]))
	for _, name := range []string{"orders", "a", "A.b_c-9", strings.Repeat("n", 128), strings.Repeat("n", 129),
		"with space", "slash/name", "colon:name", "ünïcode", "star*"} {
		_, err := template(t).Evaluate(ecsMode("FanOutConsumerName", name))
		if (err == nil) != code.MatchString(name) {
			t.Errorf("FanOutConsumerName=%q: template accepts it: %v, consumer/efo.go: %v", name, err == nil, code.MatchString(name))
		}
	}
	if _, err := template(t).Evaluate(ecsMode("FanOutConsumerName", "")); err != nil {
		t.Errorf("FanOutConsumerName empty (polling): %v", err)
	}
}
