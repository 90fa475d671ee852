package deploy

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"

	"github.com/shardsettle/lambdaadapter/internal/ascii"
	"github.com/shardsettle/lambdaadapter/observe/emf"
)

// Several streams (parameter AdditionalStreamArns, ecs mode): the one
// service reads further existing streams after the first (StreamArn, or the
// stream the stack creates) on the same lease table. The checks here: the
// rules (ecs only; no empty entry; not the first stream again), the
// parameter's per-element pattern, LAMBDAADAPTER_STREAM = first,arn2,arn3
// read as lambdaadapter's env.go reads it, and that the task role grants
// every call the tasks make on each further stream (TestIAMGrants checks
// that it grants nothing more, TestIAMStatements the one wider wildcard).

// The further streams of the cases with AdditionalStreamArns.
const (
	paymentsStreamARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/payments"
	refundsStreamARN  = "arn:aws:kinesis:eu-west-1:123456789012:stream/refunds"
	// twoMoreStreams is AdditionalStreamArns with two streams.
	twoMoreStreams = paymentsStreamARN + "," + refundsStreamARN
)

// additionalStreams returns the ARNs of AdditionalStreamArns in p, split
// and trimmed as CloudFormation does (the cases have no empty entry).
func additionalStreams(p map[string]string) []string {
	var out []string
	for _, s := range strings.Split(p["AdditionalStreamArns"], ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// multiStreamCombinations are the cases of combinations() with further
// streams: one and two, polling and fan-out, a created and an existing
// first stream, with and without the optional write targets.
func multiStreamCombinations() []combination {
	var out []combination
	for _, more := range []string{paymentsStreamARN, twoMoreStreams} {
		for _, fan := range []string{"", fanOutName} {
			for _, stream := range []string{"", existingStreamARN} {
				for _, targets := range [][]string{{"DeadLetterTarget", "stream", "CreateReplyStream", "false"}, {"DeadLetterTarget", "none", "CreateReplyStream", "true"}} {
					// Every choice of combinations() explicit, as the checks
					// read them from the parameters.
					kv := []string{"AdditionalStreamArns", more, "FanOutConsumerName", fan, "StreamArn", stream,
						"Architecture", "arm64", "MaxAttempts", "3", "Idempotency", "", "ImageRepository", "", "SecurityGroups", ""}
					p := ecsMode(append(kv, targets...)...)
					out = append(out, combination{name: describe(p), params: p})
				}
			}
		}
	}
	return out
}

// perStreamCalls are the Kinesis operations of adapterCalls that the tasks
// make on every stream they read, with the resource each is authorised on:
// the stream, or its stream consumer of FanOutConsumerName.
var perStreamCalls = map[string]string{
	"kinesis.ListShards":       "stream",
	"kinesis.GetShardIterator": "stream",
	"kinesis.GetRecords":       "stream",
	// Counted copies and forwarded delays go back to the record's own stream.
	"kinesis.PutRecords":             "stream",
	"kinesis.RegisterStreamConsumer": "stream",
	"kinesis.DescribeStreamConsumer": "consumer",
	"kinesis.SubscribeToShard":       "consumer",
}

// notPerStream are the other Kinesis operations of long-running mode, and
// why a stream of AdditionalStreamArns needs none of them.
var notPerStream = map[string]string{
	"kinesis.PutRecord":             "replies only: to the reply stream, or a stream the handler names",
	"kinesis.DescribeStreamSummary": "only for a stream given by name without its ARN; AdditionalStreamArns are ARNs",
}

// TestPerStreamCallsAreClassified checks that every Kinesis operation of
// long-running mode in adapterCalls is either made on each stream
// (perStreamCalls) or not (notPerStream), so that a new one cannot be
// missed on the further streams.
func TestPerStreamCallsAreClassified(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range adapterCalls {
		if !strings.HasPrefix(c.op, "kinesis.") || !slices.Contains(c.modes, "ecs") && c.notGranted == "" {
			continue
		}
		seen[c.op] = true
		_, per := perStreamCalls[c.op]
		_, not := notPerStream[c.op]
		if per == not {
			t.Errorf("%s: list it in exactly one of perStreamCalls and notPerStream (streams_test.go)", c.op)
		}
	}
	for op := range perStreamCalls {
		if !seen[op] {
			t.Errorf("perStreamCalls names %s, which is no Kinesis operation of long-running mode in adapterCalls", op)
		}
	}
	for op := range notPerStream {
		if !seen[op] {
			t.Errorf("notPerStream names %s, which is no Kinesis operation of long-running mode in adapterCalls", op)
		}
	}
}

// iamMatch reports whether the IAM resource pattern matches arn: * is any
// run of characters, ? any one.
func iamMatch(pattern, arn string) bool {
	re := regexp.QuoteMeta(pattern)
	re = strings.NewReplacer(`\*`, `.*`, `\?`, `.`).Replace(re)
	return regexp.MustCompile("^" + re + "$").MatchString(arn)
}

// TestAdditionalStreamGrants checks, in every combination with further
// streams, that the task role allows every call of perStreamCalls (of the
// stack's way of reading) on each of them - on the stream, or on its
// consumer of FanOutConsumerName whatever its creation time - and, in
// every combination without, that the template adds no statement for them.
func TestAdditionalStreamGrants(t *testing.T) {
	actions := map[string]string{}
	for _, c := range adapterCalls {
		actions[c.op] = c.action
	}
	n := 0
	eachCombination(t, func(c combination) {
		s := evaluate(t, c.params)
		sts := policyStatements(t, s)["TaskRole"]
		more := additionalStreams(c.params)
		if len(more) == 0 {
			for _, st := range sts {
				if strings.HasPrefix(st.Sid, "Additional") {
					t.Errorf("%s: statement %s without AdditionalStreamArns", c.name, st.Sid)
				}
			}
			return
		}
		n++
		for _, arn := range more {
			for op, kind := range perStreamCalls {
				if !granted(op, c.params) {
					continue
				}
				res := arn
				if kind == "consumer" {
					res = arn + "/consumer/" + c.params["FanOutConsumerName"] + ":1700000000"
				}
				ok := slices.ContainsFunc(sts, func(st Statement) bool {
					return slices.Contains(st.Action, actions[op]) && slices.ContainsFunc(st.Resource, func(p string) bool { return iamMatch(p, res) })
				})
				if !ok {
					t.Errorf("%s: the task role does not allow %s on %s (%s)", c.name, actions[op], res, op)
				}
			}
		}
	})
	if n == 0 && !t.Failed() {
		t.Fatal("no combination with AdditionalStreamArns")
	}
}

func TestIAMMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, arn string
		want         bool
	}{
		{paymentsStreamARN, paymentsStreamARN, true},
		{paymentsStreamARN, paymentsStreamARN + "x", false},
		{paymentsStreamARN + "/consumer/*", paymentsStreamARN + "/consumer/c:1700000000", true},
		{paymentsStreamARN + "/consumer/c:*", paymentsStreamARN + "/consumer/c:1700000000", true},
		{paymentsStreamARN + "/consumer/c:*", paymentsStreamARN + "/consumer/d:1700000000", false},
		{paymentsStreamARN + "/consumer/*", refundsStreamARN + "/consumer/c:1", false},
		{"arn:aws:kinesis:eu-west-1:123456789012:stream/pay?ents", paymentsStreamARN, true},
	} {
		if got := iamMatch(tc.pattern, tc.arn); got != tc.want {
			t.Errorf("iamMatch(%q, %q) = %v, want %v", tc.pattern, tc.arn, got, tc.want)
		}
	}
}

// TestAdditionalStreamsEnvironment checks LAMBDAADAPTER_STREAM in every
// ecs-mode combination: the first stream's name alone without further
// streams; with them, the first stream's name, then each ARN of
// AdditionalStreamArns in order, and read as lambdaadapter's environment
// reads it (adapterStreams) that is every stream, each once, all of them
// names or ARNs it accepts.
func TestAdditionalStreamsEnvironment(t *testing.T) {
	eachCombination(t, func(c combination) {
		if c.params["Mode"] != "ecs" {
			return
		}
		s := evaluate(t, c.params)
		env := ecsEnv(t, s)
		more := additionalStreams(c.params)
		want := strings.Join(append([]string{streamName(s)}, more...), ",")
		if got := env["LAMBDAADAPTER_STREAM"]; got != want {
			t.Errorf("%s: LAMBDAADAPTER_STREAM = %q, want %q", c.name, got, want)
			return
		}
		streams := adapterStreams(t, env["LAMBDAADAPTER_STREAM"])
		names := map[string]bool{}
		for i, st := range streams {
			if names[st.name] {
				t.Errorf("%s: LAMBDAADAPTER_STREAM names the stream %s twice: the adapter reads it once", c.name, st.name)
			}
			names[st.name] = true
			wantARN := ""
			if i > 0 {
				wantARN = more[i-1]
			}
			if st.arn != wantARN {
				t.Errorf("%s: stream %d of LAMBDAADAPTER_STREAM has ARN %q, want %q", c.name, i, st.arn, wantARN)
			}
		}
		// The first stream's ARN (fan-out, copies) comes from
		// LAMBDAADAPTER_STREAM_ARN, as with one stream.
		if env["LAMBDAADAPTER_STREAM_ARN"] != sourceStream(c.params) {
			t.Errorf("%s: LAMBDAADAPTER_STREAM_ARN = %q, want the first stream's %q", c.name, env["LAMBDAADAPTER_STREAM_ARN"], sourceStream(c.params))
		}
	})
}

// adaptedStream is one stream of LAMBDAADAPTER_STREAM as the adapter reads
// it: its name, and its ARN when given by ARN.
type adaptedStream struct{ name, arn string }

// Where lambdaadapter reads LAMBDAADAPTER_STREAM and parses each stream.
const (
	envStreamSource   = "../env.go"
	parseStreamSource = "../service.go"
)

// adapterStreams reads v, a LAMBDAADAPTER_STREAM, as lambdaadapter does:
// env.go cuts it at its commas (the first element WithStream's, the rest
// WithStreams', each trimmed) and service.go's parseStream takes an element
// starting with arn: as a Kinesis stream's ARN, whose name after stream/ is
// a stream name as any other element: 1 to 128 letters, digits, '_', '-'
// and '.' (adapterStreamName). It fails t when either source no longer
// reads that way, and for an element the adapter would refuse.
func adapterStreams(t *testing.T, v string) []adaptedStream {
	t.Helper()
	src, err := os.ReadFile(envStreamSource)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`first, rest, _ := strings.Cut(v, ",")`, `WithStream(strings.TrimSpace(first))`,
		`for s := range strings.SplitSeq(rest, ",")`, `more = append(more, strings.TrimSpace(s))`, `WithStreams(more...)`} {
		if !strings.Contains(string(src), want) {
			t.Fatalf("%s no longer contains %q: check how it reads LAMBDAADAPTER_STREAM and update adapterStreams", envStreamSource, want)
		}
	}
	src, err = os.ReadFile(parseStreamSource)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`if strings.HasPrefix(s, "arn:") {`, `i := strings.Index(s, ":stream/")`,
		`if i < 0 || !strings.Contains(s[:i], ":kinesis:") || !ascii.StreamName(s[i+len(":stream/"):]) {`, `if !ascii.StreamName(s) {`} {
		if !strings.Contains(string(src), want) {
			t.Fatalf("%s no longer contains %q: check parseStream and update adapterStreams", parseStreamSource, want)
		}
	}
	var out []adaptedStream
	for _, el := range strings.Split(v, ",") {
		s := strings.TrimSpace(el)
		if strings.HasPrefix(s, "arn:") {
			i := strings.Index(s, ":stream/")
			if i < 0 || !strings.Contains(s[:i], ":kinesis:") || !adapterStreamName(s[i+len(":stream/"):]) {
				t.Errorf("LAMBDAADAPTER_STREAM=%q: %q is not a Kinesis stream ARN the adapter accepts", v, s)
				continue
			}
			out = append(out, adaptedStream{name: s[i+len(":stream/"):], arn: s})
			continue
		}
		if !adapterStreamName(s) {
			t.Errorf("LAMBDAADAPTER_STREAM=%q: %q is not a stream name the adapter accepts", v, s)
			continue
		}
		out = append(out, adaptedStream{name: s})
	}
	return out
}

// adapterStreamName is service.go's check, ascii.StreamName. A reference
// of the template (${Stream}, the stream the stack creates) stands for the
// name it resolves to.
func adapterStreamName(s string) bool {
	if strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}") {
		return true
	}
	return ascii.StreamName(s)
}

// TestAdditionalStreamsRules checks the parameter's pattern and the rules:
// only in ecs mode, only stream ARNs (each element), no empty entry, not
// the first stream again; a list of nothing but commas is no stream.
func TestAdditionalStreamsRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]string
		rules  []string // the rules that fail
		err    string   // or the error
	}{
		{"ecs, one more", ecsMode("AdditionalStreamArns", paymentsStreamARN), nil, ""},
		{"ecs, two more, spaces", ecsMode("AdditionalStreamArns", " "+paymentsStreamARN+" , "+refundsStreamARN), nil, ""},
		{"ecs, existing first stream", ecsMode("StreamArn", existingStreamARN, "AdditionalStreamArns", twoMoreStreams), nil, ""},
		{"lambda, empty", lambdaMode("AdditionalStreamArns", ""), nil, ""},
		{"lambda, one more", lambdaMode("AdditionalStreamArns", paymentsStreamARN), []string{"AdditionalStreamsNeedEcs"}, ""},
		{"lambda, fan-out", lambdaMode("AdditionalStreamArns", paymentsStreamARN, "FanOutConsumerName", fanOutName), []string{"AdditionalStreamsNeedEcs"}, ""},
		{"empty entry", ecsMode("AdditionalStreamArns", paymentsStreamARN+","), []string{"AdditionalStreamArnsAreStreams"}, ""},
		{"empty entry first", ecsMode("AdditionalStreamArns", ","+paymentsStreamARN), []string{"AdditionalStreamArnsAreStreams"}, ""},
		{"the first stream again", ecsMode("StreamArn", existingStreamARN, "AdditionalStreamArns", paymentsStreamARN+","+existingStreamARN),
			[]string{"AdditionalStreamArnsAfterTheFirst"}, ""},
		{"the first stream alone again", ecsMode("StreamArn", existingStreamARN, "AdditionalStreamArns", existingStreamARN),
			[]string{"AdditionalStreamArnsAfterTheFirst"}, ""},
		{"only commas", ecsMode("AdditionalStreamArns", ",,"), nil, ""},
		{"a name", ecsMode("AdditionalStreamArns", "payments"), nil, "does not match AllowedPattern"},
		{"a name after an ARN", ecsMode("AdditionalStreamArns", paymentsStreamARN+",refunds"), nil, "does not match AllowedPattern"},
		{"a queue", ecsMode("AdditionalStreamArns", "arn:aws:sqs:eu-west-1:123456789012:payments"), nil, "does not match AllowedPattern"},
		{"a consumer", ecsMode("AdditionalStreamArns", paymentsStreamARN+"/consumer/c:1700000000"), nil, "does not match AllowedPattern"},
	} {
		s, err := template(t).Evaluate(tc.params)
		var got []string
		var re *RuleError
		if errors.As(err, &re) {
			for _, f := range re.Failed {
				name, _, _ := strings.Cut(f, ":")
				got = append(got, name)
			}
		} else if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: Evaluate = %v, want an error containing %q", tc.name, err, tc.err)
			}
			continue
		} else if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(got, tc.rules) {
			t.Errorf("%s: failed rules %q, want %q (%v)", tc.name, got, tc.rules, err)
		}
		if s != nil && strings.Trim(tc.params["AdditionalStreamArns"], ", ") == "" && tc.params["Mode"] == "ecs" {
			// Nothing but commas: as without the parameter.
			if got, want := ecsEnv(t, s)["LAMBDAADAPTER_STREAM"], streamName(s); got != want {
				t.Errorf("%s: LAMBDAADAPTER_STREAM = %q, want %q", tc.name, got, want)
			}
		}
	}
}

// streamsOf returns every stream a stack with parameters p reads, by
// name: the first, then those of AdditionalStreamArns.
func streamsOf(s *Stack) []string {
	out := []string{streamName(s)}
	for _, arn := range additionalStreams(stringParams(s)) {
		out = append(out, arn[strings.LastIndex(arn, "/")+1:])
	}
	return out
}

// stringParams returns the evaluated parameters of s that are strings, and
// the lists joined with commas.
func stringParams(s *Stack) map[string]string {
	out := map[string]string{}
	for k, v := range s.Params {
		switch x := v.(type) {
		case string:
			out[k] = x
		case []string:
			out[k] = strings.Join(x, ",")
		default:
			out[k] = fmt.Sprint(x)
		}
	}
	return out
}

// TestAlarmsWatchEveryStream checks what the template and the docs say of
// the alarms and the scaling policy with AdditionalStreamArns: each
// watches its metric under the service dimension alone, and the exporter,
// configured from the tasks' environment, writes that series for the
// events of each stream alone (a backlog or a stuck record on any one
// stream alarms and scales).
func TestAlarmsWatchEveryStream(t *testing.T) {
	n := 0
	for _, c := range slices.Concat(observabilityCombinations(), autoScalingCombinations()) {
		if len(additionalStreams(c.params)) == 0 {
			continue
		}
		s := evaluate(t, c.params)
		watched := map[metricKey]string{} // by what
		for _, id := range idsOfType(s, "AWS::CloudWatch::Alarm") {
			a := &cloudwatch.Alarm{}
			if err := s.Decode(id, a); err != nil {
				t.Fatal(err)
			}
			if deref(a.Namespace) == emf.DefaultNamespace {
				watched[metricKey{namespace: deref(a.Namespace), name: deref(a.MetricName), dims: dimString(alarmDimensions(a))}] = id
			}
		}
		if autoScaling(c.params) {
			watched[policyMetric(t, s)] = scalingPolicyID
		}
		if len(watched) == 0 {
			continue
		}
		n++
		service := dimString(map[string]string{"service": "${AWS::StackName}"})
		streams := streamsOf(s)
		for i, name := range streams {
			written := exporterMetricsOf(t, s, func(j int) bool { return j == i })
			for k, by := range watched {
				if k.dims != service {
					t.Errorf("%s: %s watches %s {%s}, want {%s}: the service over every stream", c.name, by, k.name, k.dims, service)
				}
				if _, w := written[k]; !w {
					t.Errorf("%s: with events on stream %s alone, the exporter writes no %s {%s} that %s watches; it writes:\n%s", c.name, name, k.name, k.dims, by, describeMetrics(written))
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no combination with further streams and alarms or autoscaling")
	}
}
