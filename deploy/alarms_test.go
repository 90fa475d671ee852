package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"
	"github.com/awslabs/goformation/v7/cloudformation/kinesis"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/observe/emf"
)

// The template's metrics and alarms: LAMBDAADAPTER_METRICS (parameter
// Metrics, read by cmd/bootstrap) and POWERTOOLS_SERVICE_NAME in both
// modes, and, with Alarms=true, CloudWatch alarms on what observe/emf
// writes. The alarms are checked against the exporter itself: it is run
// with the environment the template sets and the stream the adapter sees,
// and every alarm must watch a metric it writes (namespace, name,
// dimensions and their values, unit).

// bootstrapMain is where cmd/bootstrap reads LAMBDAADAPTER_METRICS.
const bootstrapMain = "../cmd/bootstrap/main.go"

// alarmSpec is one alarm the template creates with Alarms=true.
type alarmSpec struct {
	id    string
	modes []string
	// metric is the metric watched in a stack with parameters p.
	metric func(p map[string]any) string
	// unit is the unit the exporter (or AWS) writes the metric in; the
	// threshold is in it.
	unit      string
	statistic string
	// threshold is the alarm's threshold in a stack with parameters p.
	threshold          func(p map[string]any) float64
	periods, datapoint int
	// missing is the alarm's TreatMissingData: notBreaching for a metric
	// written only when there is something to count (a count, the age of
	// records there are), breaching for one written in every interval while
	// the consumer runs (a heartbeat: missing means it does not), ignore
	// for one AWS publishes per batch sent.
	missing string
	// lambdaMetric marks an alarm on AWS/Lambda's own metrics of the
	// function (namespace AWS/Lambda, dimension FunctionName), which Lambda
	// publishes whatever the function's code does; the others watch what
	// observe/emf writes.
	lambdaMetric bool
}

// named returns a metric function for a fixed metric name.
func named(name string) func(map[string]any) string {
	return func(map[string]any) string { return name }
}

// zero is the threshold of the count alarms: any count.
func zero(map[string]any) float64 { return 0 }

// lagThreshold is OldestRecordAgeAlarmSeconds in milliseconds.
func lagThreshold(p map[string]any) float64 {
	return secondsParam(p, "OldestRecordAgeAlarmSeconds") * 1000
}

// iteratorAgeThreshold is IteratorAgeAlarmSeconds in milliseconds.
func iteratorAgeThreshold(p map[string]any) float64 {
	return secondsParam(p, "IteratorAgeAlarmSeconds") * 1000
}

// secondsParam is a whole-seconds parameter of an evaluated stack (whose
// parameters include the defaults).
func secondsParam(p map[string]any, name string) float64 {
	v, ok := p[name].(string)
	if !ok {
		panic(name + " is not set")
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil {
		panic(err)
	}
	return secs
}

// lambdaOnly are the alarms of Lambda mode only.
var lambdaOnly = []string{"lambda"}

// awsLambdaMetrics are the AWS/Lambda metrics the alarms may watch, with
// the unit AWS publishes them in: IteratorAge for functions with a stream
// event source, per batch sent (the age of its last record when the event
// source sends it), and Errors per invocation that fails (timeouts and
// crashes included). AWS publishes both with the dimension FunctionName
// alone: the aggregate over the function's versions and aliases.
var awsLambdaMetrics = map[string]string{"IteratorAge": "Milliseconds", "Errors": "Count"}

var alarmSpecs = []alarmSpec{
	// The consumer is behind or a record is stuck: 5 minutes in a row.
	// Written only when there are records (Lambda: per invocation that
	// reaches its end), so an idle stream writes none.
	{"OldestRecordAgeAlarm", bothModes, named("OldestRecordAge"), "Milliseconds", "Maximum", lagThreshold, 5, 5, "notBreaching", false},
	// Records gave up: dead letters, or, without a dead-letter target,
	// records retired at the cap.
	{"GaveUpAlarm", bothModes, func(p map[string]any) string {
		if p["DeadLetterTarget"] == "none" {
			return "RecordsRetired"
		}
		return "DeadLetters"
	}, "Count", "Sum", zero, 1, 1, "notBreaching", false},
	// Writes that keep failing hold their shards: 3 minutes in a row.
	{"WriteFailuresAlarm", bothModes, named("WriteFailures"), "Count", "Sum", zero, 3, 3, "notBreaching", false},
	{"PoisonRecordsAlarm", bothModes, named("PoisonRecords"), "Count", "Sum", zero, 1, 1, "notBreaching", false},
	{"CheckpointFailuresAlarm", ecsOnly, named("CheckpointFailures"), "Count", "Sum", zero, 3, 3, "notBreaching", false},
	// Written after every GetRecords, 0 at the tip of an idle stream
	// (TestECSIdleStreamWritesMillisBehindLatest in the library): 5
	// minutes without it mean no task read the stream.
	{"MillisBehindLatestAlarm", ecsOnly, named("MillisBehindLatest"), "Milliseconds", "Maximum", lagThreshold, 5, 5, "breaching", false},
	// Lambda mode: what Lambda publishes itself, also for an invocation
	// that timed out or crashed and so wrote no EMF line. IteratorAge per
	// batch sent (none when idle, one per function timeout while a shard
	// is stuck): its state holds between batches.
	{"IteratorAgeAlarm", lambdaOnly, named("IteratorAge"), "Milliseconds", "Maximum", iteratorAgeThreshold, 1, 1, "ignore", true},
	{"FunctionErrorsAlarm", lambdaOnly, named("Errors"), "Count", "Sum", zero, 1, 1, "notBreaching", true},
}

// observabilityCombinations are the cases of combinations() with metrics,
// alarms and enhanced fan-out: both modes, polling and fan-out, metrics off,
// alarms without and with a topic, a created and an existing stream, with
// and without a dead-letter target, and in ecs mode with and without further
// streams (AdditionalStreamArns).
func observabilityCombinations() []combination {
	var out []combination
	for _, mode := range []string{"lambda", "ecs"} {
		for _, fan := range []string{"", fanOutName} {
			for _, alarms := range [][]string{
				{"Metrics", "emf", "Alarms", "false", "AlarmTopicArn", ""},
				{"Metrics", "off", "Alarms", "false", "AlarmTopicArn", ""},
				{"Metrics", "emf", "Alarms", "true", "AlarmTopicArn", ""},
				{"Metrics", "emf", "Alarms", "true", "AlarmTopicArn", alarmTopic, "OldestRecordAgeAlarmSeconds", "120"},
			} {
				for _, stream := range []string{"", existingStreamARN} {
					for _, dlt := range []string{"stream", "none"} {
						mores := []string{""}
						if mode == "ecs" {
							mores = append(mores, twoMoreStreams)
						}
						for _, more := range mores {
							base := lambdaMode()
							if mode == "ecs" {
								base = ecsMode()
							}
							// Every choice of combinations() explicit, as the
							// checks read them from the parameters.
							kv := []string{"FanOutConsumerName", fan, "StreamArn", stream, "DeadLetterTarget", dlt,
								"CreateReplyStream", "false", "Architecture", "arm64", "MaxAttempts", "3", "Idempotency", "",
								"AdditionalStreamArns", more}
							p := params(base, append(kv, alarms...)...)
							if mode == "ecs" {
								p["ImageRepository"], p["SecurityGroups"] = "", ""
							}
							out = append(out, combination{name: describe(p), params: p})
						}
					}
				}
			}
		}
	}
	return out
}

// TestAlarms checks, in every combination, which alarms exist and what
// each watches: only with Alarms=true, only in its modes; the namespace
// and dimensions of the metrics the adapter writes (service = the stack's
// name, which POWERTOOLS_SERVICE_NAME is set to; Stream = the consumed
// stream's name, none with AdditionalStreamArns: watchedDims; for the AWS/Lambda alarms, FunctionName = the function),
// the metric, statistic, threshold, one-minute periods, the treatment of
// missing data (alarmSpec.missing), and notifications to AlarmTopicArn
// only when one is given.
func TestAlarms(t *testing.T) {
	known := map[string]bool{}
	for _, a := range alarmSpecs {
		known[a.id] = true
	}
	eachCombination(t, func(c combination) {
		s := evaluate(t, c.params)
		for _, id := range idsOfType(s, "AWS::CloudWatch::Alarm") {
			if !known[id] {
				t.Errorf("%s: alarm %s is not in alarmSpecs: add what it watches", c.name, id)
			}
		}
		on := s.Params["Alarms"] == "true"
		mode := s.Params["Mode"].(string)
		var names []string
		for _, spec := range alarmSpecs {
			r, ok := s.Resources[spec.id]
			if want := on && slices.Contains(spec.modes, mode); ok != want {
				t.Errorf("%s: alarm %s created: %v, want %v", c.name, spec.id, ok, want)
			}
			if !ok {
				continue
			}
			if r.Type != "AWS::CloudWatch::Alarm" {
				t.Errorf("%s: %s is a %s", c.name, spec.id, r.Type)
				continue
			}
			a := &cloudwatch.Alarm{}
			if err := s.Decode(spec.id, a); err != nil {
				t.Fatal(err)
			}
			names = append(names, "${"+spec.id+"}")
			at := c.name + ": " + spec.id
			wantDims := watchedDims(s)
			namespace := emf.DefaultNamespace
			if spec.lambdaMetric {
				wantDims, namespace = map[string]string{"FunctionName": "${" + functionID + "}"}, "AWS/Lambda"
			}
			if diff := cmp.Diff(wantDims, alarmDimensions(a)); diff != "" {
				t.Errorf("%s: dimensions (-want +got):\n%s", at, diff)
			}
			got := []any{deref(a.Namespace), deref(a.MetricName), deref(a.Statistic), deref(a.ExtendedStatistic), deref(a.Threshold),
				deref(a.Period), a.EvaluationPeriods, deref(a.DatapointsToAlarm), a.ComparisonOperator, deref(a.TreatMissingData), deref(a.Unit), len(a.Metrics)}
			want := []any{namespace, spec.metric(s.Params), spec.statistic, "", spec.threshold(s.Params),
				60, spec.periods, spec.datapoint, "GreaterThanThreshold", spec.missing, "", 0}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: [namespace metric statistic extended threshold period periods datapoints comparison missing unit metrics] (-want +got):\n%s", at, diff)
			}
			var topic []string
			if tp := s.Params["AlarmTopicArn"].(string); tp != "" {
				topic = []string{tp}
			}
			if !slices.Equal(a.AlarmActions, topic) || !slices.Equal(a.OKActions, topic) || a.InsufficientDataActions != nil {
				t.Errorf("%s: AlarmActions %q, OKActions %q, InsufficientDataActions %q; want %q, %q and none", at, a.AlarmActions, a.OKActions, a.InsufficientDataActions, topic, topic)
			}
			if a.ActionsEnabled != nil && !*a.ActionsEnabled {
				t.Errorf("%s: ActionsEnabled false", at)
			}
			if !strings.HasPrefix(deref(a.AlarmName), "${AWS::StackName}-") || deref(a.AlarmDescription) == "" {
				t.Errorf("%s: AlarmName %q (want the stack's name first), AlarmDescription %q", at, deref(a.AlarmName), deref(a.AlarmDescription))
			}
		}
		got, ok := s.Outputs["AlarmNames"]
		if want := strings.Join(names, ", "); ok != on || ok && got != want {
			t.Errorf("%s: output AlarmNames = %v (present %v), want %q", c.name, got, ok, want)
		}
	})
}

// alarmDimensions returns an alarm's dimensions by name.
func alarmDimensions(a *cloudwatch.Alarm) map[string]string {
	out := map[string]string{}
	for _, d := range a.Dimensions {
		out[d.Name] = d.Value
	}
	return out
}

// watchedDims are the dimensions of the adapter's metrics that the alarms
// and the scaling policy of s watch: the service and the stream's name;
// with AdditionalStreamArns the service alone, under which the exporter
// publishes every stream's metrics too (emf.WithServiceDimension, set by
// emf.Environment when LAMBDAADAPTER_STREAM names several streams).
func watchedDims(s *Stack) map[string]string {
	if len(streamsOf(s)) > 1 {
		return map[string]string{"service": "${AWS::StackName}"}
	}
	return map[string]string{"service": "${AWS::StackName}", "Stream": streamName(s)}
}

// streamName is the consumed stream's name as the stack names it.
func streamName(s *Stack) string {
	if arn := s.Params["StreamArn"].(string); arn != "" {
		return arn[strings.LastIndex(arn, "/")+1:]
	}
	return "${Stream}"
}

// TestAlarmsWatchWhatTheAdapterWrites runs observe/emf's Exporter as the
// adapter runs it (emf.Environment of the environment the template sets,
// plus what Lambda sets itself), feeds it the events behind every alarmed
// metric with the stream the adapter sees (the event source's ARN in
// Lambda mode, the configured stream in long-running mode), and checks that
// each alarm watches a metric of the lines it writes: same namespace, name
// and dimension values, and the unit the threshold is in.
func TestAlarmsWatchWhatTheAdapterWrites(t *testing.T) {
	n := 0
	for _, c := range observabilityCombinations() {
		if c.params["Alarms"] != "true" {
			continue
		}
		n++
		s := evaluate(t, c.params)
		written := exporterMetrics(t, s)
		for _, spec := range alarmSpecs {
			if _, ok := s.Resources[spec.id]; !ok || spec.lambdaMetric {
				continue // AWS/Lambda's own: TestLambdaMetricAlarms
			}
			a := &cloudwatch.Alarm{}
			if err := s.Decode(spec.id, a); err != nil {
				t.Fatal(err)
			}
			k := metricKey{namespace: deref(a.Namespace), name: deref(a.MetricName), dims: dimString(alarmDimensions(a))}
			unit, ok := written[k]
			switch {
			case !ok:
				t.Errorf("%s: %s watches %+v, which the exporter does not write; it writes:\n%s", c.name, spec.id, k, describeMetrics(written))
			case unit != spec.unit:
				t.Errorf("%s: %s: the exporter writes %s in %s, the threshold is in %s", c.name, spec.id, k.name, unit, spec.unit)
			}
		}
	}
	if n == 0 {
		t.Fatal("no combination with alarms")
	}
}

// TestLambdaMetricAlarms checks the alarms on AWS/Lambda's own metrics in
// every Lambda-mode combination with alarms: each watches a metric AWS
// publishes for a function with a Kinesis event source, in the unit the
// threshold is in, of the function the stack's Kinesis event source
// invokes (its FunctionName dimension is the function's name, and the
// function publishes no versions or aliases, so the aggregate AWS
// publishes under FunctionName alone is that function's). Without them a
// stuck shard whose invocations time out would go unnoticed: a timed-out
// invocation writes no EMF line, and the EMF alarms treat missing data as
// not breaching.
func TestLambdaMetricAlarms(t *testing.T) {
	n := 0
	for _, c := range observabilityCombinations() {
		if c.params["Alarms"] != "true" {
			continue
		}
		s := evaluate(t, c.params)
		if s.Params["Mode"] != "lambda" {
			continue
		}
		_, fn, events := function(t, s)
		if fn.FunctionName != nil {
			t.Errorf("%s: the function has a fixed name %q; the alarms' FunctionName is its Ref", c.name, *fn.FunctionName)
		}
		if props := s.Resources[functionID].Properties; props["AutoPublishAlias"] != nil || props["VersionDescription"] != nil {
			t.Errorf("%s: the function publishes versions or an alias: the event source would invoke it, and FunctionName alone aggregates them all", c.name)
		}
		// The stream's one event source is the function's own event (SAM
		// maps it to the function, unqualified without AutoPublishAlias);
		// no mapping of its own elsewhere in the stack.
		if ks := eventsOfType(events, "Kinesis"); len(ks) != 1 {
			t.Fatalf("%s: %d Kinesis events", c.name, len(ks))
		}
		if ids := idsOfType(s, "AWS::Lambda::EventSourceMapping"); len(ids) != 0 {
			t.Errorf("%s: event source mappings %v besides the function's events", c.name, ids)
		}
		for _, spec := range alarmSpecs {
			if !spec.lambdaMetric {
				continue
			}
			n++
			a := &cloudwatch.Alarm{}
			if err := s.Decode(spec.id, a); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			unit, ok := awsLambdaMetrics[deref(a.MetricName)]
			switch {
			case deref(a.Namespace) != "AWS/Lambda" || !ok:
				t.Errorf("%s: %s watches %s %s, not an AWS/Lambda metric of a stream event source (%v)", c.name, spec.id, deref(a.Namespace), deref(a.MetricName), slices.Sorted(maps.Keys(awsLambdaMetrics)))
			case unit != spec.unit:
				t.Errorf("%s: %s: AWS publishes %s in %s, the threshold is in %s", c.name, spec.id, deref(a.MetricName), unit, spec.unit)
			}
			if diff := cmp.Diff(map[string]string{"FunctionName": "${" + functionID + "}"}, alarmDimensions(a)); diff != "" {
				t.Errorf("%s: %s dimensions (-want +got):\n%s", c.name, spec.id, diff)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Lambda-mode combination with alarms")
	}
}

// metricKey is one metric of the EMF lines: namespace, name and dimension
// values ("name=value,..." sorted by name).
type metricKey struct{ namespace, name, dims string }

func dimString(d map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, k+"="+d[k])
	}
	return strings.Join(parts, ",")
}

func describeMetrics(m map[metricKey]string) string {
	var lines []string
	for k, unit := range m {
		lines = append(lines, fmt.Sprintf("  %s %s {%s} %s", k.namespace, k.name, k.dims, unit))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// exporterMetrics returns the metrics (with their units) that the adapter
// of stack s writes when every alarmed event happens, on every stream it
// reads (in ecs mode, those of AdditionalStreamArns too).
func exporterMetrics(t *testing.T, s *Stack) map[metricKey]string {
	t.Helper()
	return exporterMetricsOf(t, s, func(int) bool { return true })
}

// exporterMetricsOf is exporterMetrics with events on the streams whose
// index (0 the first) only admits, in ecs mode.
func exporterMetricsOf(t *testing.T, s *Stack, only func(i int) bool) map[metricKey]string {
	t.Helper()
	mode := s.Params["Mode"].(string)
	env := modeEnv(t, s)
	getenv := func(name string) string {
		if v, ok := env[name]; ok {
			return v
		}
		if name == "AWS_LAMBDA_FUNCTION_NAME" && mode == "lambda" {
			return "${" + functionID + "}" // Lambda sets it: the generated name
		}
		return ""
	}
	var out bytes.Buffer
	e := emf.New(&out, append(emf.Environment(getenv), emf.WithClock(func() time.Time { return time.Unix(1_700_000_000, 0) }))...)
	fail := errors.New("throttled")
	if mode == "lambda" {
		// The stream of every event is the one of the records Lambda
		// delivers: the event source's ARN (a consumer's, with fan-out).
		_, _, events := function(t, s)
		ks := eventsOfType(events, "Kinesis")
		if len(ks) != 1 {
			t.Fatalf("%d Kinesis events", len(ks))
		}
		arn := concreteARN(t, s, deref(ks[0].Mapping.EventSourceArn))
		lm := observe.ModeLambda
		e.OnRecord(observe.Record{Mode: lm, Stream: arn, ShardID: "shardId-000000000000", Outcome: "retry", Action: observe.ActionDeadLetter})
		e.OnRecord(observe.Record{Mode: lm, Stream: arn, ShardID: "shardId-000000000000", Outcome: "retry", Action: observe.ActionRetired})
		e.OnRecord(observe.Record{Mode: lm, Stream: arn, ShardID: "shardId-000000000000", Outcome: "drop", Action: observe.ActionSettled, Reason: "malformed aggregate"})
		e.OnWrite(observe.Write{Mode: lm, Kind: observe.WriteDeadLetter, Stream: arn, ShardID: "shardId-000000000000"})
		e.OnWrite(observe.Write{Mode: lm, Kind: observe.WriteCopy, Stream: arn, ShardID: "shardId-000000000000", Err: fail})
		e.OnInvocation(observe.Invocation{Records: 3, Duration: time.Second, OldestAge: time.Minute, Stream: arn})
	} else {
		// Long-running mode names the stream by its ARN (records, writes,
		// in-flight snapshots) or by its name (reads, checkpoints).
		em := observe.ModeECS
		for i, st := range ecsStreams(t, s) {
			if !only(i) {
				continue
			}
			arn, name := st.arn, st.name
			e.OnRecord(observe.Record{Mode: em, Stream: arn, ShardID: "shardId-000000000000", Outcome: "retry", Action: observe.ActionDeadLetter})
			e.OnRecord(observe.Record{Mode: em, Stream: arn, ShardID: "shardId-000000000000", Outcome: "retry", Action: observe.ActionRetired})
			e.OnRecord(observe.Record{Mode: em, Stream: arn, ShardID: "shardId-000000000000", Outcome: "drop", Action: observe.ActionSettled, Reason: "malformed aggregate"})
			e.OnWrite(observe.Write{Mode: em, Kind: observe.WriteDeadLetter, Stream: arn, ShardID: "shardId-000000000000"})
			e.OnWrite(observe.Write{Mode: em, Kind: observe.WriteCopy, Stream: arn, ShardID: "shardId-000000000000", Err: fail})
			e.OnRead(observe.Read{Stream: name, ShardID: "shardId-000000000000", Records: 10, MillisBehindLatest: 60_000})
			e.OnCheckpoint(observe.Checkpoint{Stream: name, ShardID: "shardId-000000000000", Checkpoint: "1", Err: fail})
			e.OnInFlight(observe.InFlight{Stream: arn, Records: 3, OldestAge: time.Minute, LeasesHeld: 1})
		}
	}
	e.Flush(context.Background())
	return parseEMF(t, out.Bytes())
}

// ecsStreams returns the streams the tasks of ecs-mode stack s read, by
// name and ARN as the adapter has them at run time: LAMBDAADAPTER_STREAM
// read as the adapter reads it, the first stream's ARN from
// LAMBDAADAPTER_STREAM_ARN.
func ecsStreams(t *testing.T, s *Stack) []adaptedStream {
	t.Helper()
	env := ecsEnv(t, s)
	streams := adapterStreams(t, env["LAMBDAADAPTER_STREAM"])
	if len(streams) == 0 {
		t.Fatalf("LAMBDAADAPTER_STREAM=%q names no stream", env["LAMBDAADAPTER_STREAM"])
	}
	streams[0].arn = concreteARN(t, s, env["LAMBDAADAPTER_STREAM_ARN"])
	return streams
}

// concreteARN returns the ARN v (as Evaluate writes it: a parameter's
// value, or a resource's symbolic ARN) as the adapter gets it at run time:
// a created stream's ARN ends in its name, ${Stream}; a stream consumer's
// in its stream's ARN, its name and its creation time.
func concreteARN(t *testing.T, s *Stack, v string) string {
	t.Helper()
	m := symbolicARN.FindStringSubmatch(v)
	if m == nil {
		return v
	}
	r, ok := s.Resources[m[1]]
	if !ok {
		t.Fatalf("%s: no such resource", v)
	}
	switch r.Type {
	case "AWS::Kinesis::Stream":
		return "arn:aws:kinesis:eu-west-1:123456789012:stream/${" + m[1] + "}"
	case "AWS::Kinesis::StreamConsumer":
		c := &kinesis.StreamConsumer{}
		if err := s.Decode(m[1], c); err != nil {
			t.Fatal(err)
		}
		return concreteARN(t, s, c.StreamARN) + "/consumer/" + c.ConsumerName + ":1700000000"
	}
	t.Fatalf("%s: a %s", v, r.Type)
	return ""
}

// parseEMF reads EMF lines: every metric of every directive, with the
// values of its dimensions, and its unit.
func parseEMF(t *testing.T, out []byte) map[metricKey]string {
	t.Helper()
	metrics := map[metricKey]string{}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var doc map[string]any
		if err := json.Unmarshal(line, &doc); err != nil {
			t.Fatalf("EMF line %q: %v", line, err)
		}
		var meta struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name, Unit string }
				}
			} `json:"_aws"`
		}
		if err := json.Unmarshal(line, &meta); err != nil {
			t.Fatal(err)
		}
		for _, d := range meta.AWS.CloudWatchMetrics {
			for _, set := range d.Dimensions {
				dims := map[string]string{}
				for _, name := range set {
					v, ok := doc[name].(string)
					if !ok {
						t.Fatalf("EMF line %q: dimension %s has no string value", line, name)
					}
					dims[name] = v
				}
				for _, m := range d.Metrics {
					metrics[metricKey{d.Namespace, m.Name, dimString(dims)}] = m.Unit
				}
			}
		}
	}
	if len(metrics) == 0 {
		t.Fatalf("the exporter wrote no metrics: %q", out)
	}
	return metrics
}

// TestMetricsEnvironment checks what the template sets for the exporter in
// both modes: LAMBDAADAPTER_METRICS from the parameter Metrics (a value
// cmd/bootstrap accepts), and POWERTOOLS_SERVICE_NAME, the service
// dimension, set to the stack's name (without it Lambda mode would use the
// function's generated name, which the alarms cannot know).
func TestMetricsEnvironment(t *testing.T) {
	accepted := bootstrapMetricsValues(t)
	p := template(t).Parameters["Metrics"]
	var allowed []string
	for _, v := range p.AllowedValues {
		allowed = append(allowed, scalarString(v))
	}
	if !slices.Equal(slices.Sorted(slices.Values(allowed)), accepted) {
		t.Errorf("Metrics AllowedValues %q, want the values cmd/bootstrap accepts %q", allowed, accepted)
	}
	if scalarString(p.Default) != "emf" {
		t.Errorf("Metrics defaults to %v, want emf", p.Default)
	}
	for _, base := range []map[string]string{lambdaMode(), ecsMode()} {
		for _, v := range allowed {
			env := modeEnv(t, evaluate(t, params(base, "Metrics", v)))
			mode := "lambda mode"
			if base["Mode"] == "ecs" {
				mode = "ecs mode"
			}
			if got := env["LAMBDAADAPTER_METRICS"]; got != v {
				t.Errorf("%s, Metrics=%s: LAMBDAADAPTER_METRICS = %q", mode, v, got)
			}
			if got := env["POWERTOOLS_SERVICE_NAME"]; got != "${AWS::StackName}" {
				t.Errorf("%s, Metrics=%s: POWERTOOLS_SERVICE_NAME = %q, want the stack's name", mode, v, got)
			}
			if _, ok := env["POWERTOOLS_METRICS_NAMESPACE"]; ok {
				t.Errorf("%s: POWERTOOLS_METRICS_NAMESPACE is set; the alarms assume %s", mode, emf.DefaultNamespace)
			}
		}
	}
}

// bootstrapMetricsValues returns the values of LAMBDAADAPTER_METRICS that
// cmd/bootstrap accepts (besides ""), read from its source.
func bootstrapMetricsValues(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile(bootstrapMain)
	if err != nil {
		t.Fatal(err)
	}
	sw := regexp.MustCompile(`(?s)switch v := getenv\("LAMBDAADAPTER_METRICS"\); v \{(.*?)\n\tdefault:`).FindSubmatch(src)
	if sw == nil {
		t.Fatalf("%s no longer switches on LAMBDAADAPTER_METRICS as this test expects; update it and the template", bootstrapMain)
	}
	var out []string
	for _, c := range regexp.MustCompile(`case ([^:]+):`).FindAllSubmatch(sw[1], -1) {
		for _, lit := range regexp.MustCompile(`"([^"]*)"`).FindAllSubmatch(c[1], -1) {
			if len(lit[1]) > 0 {
				out = append(out, string(lit[1]))
			}
		}
	}
	slices.Sort(out)
	if !slices.Contains(out, "emf") {
		t.Fatalf("%s: LAMBDAADAPTER_METRICS accepts %q, no emf", bootstrapMain, out)
	}
	return out
}

// bootstrapMetricsVariables returns the LAMBDAADAPTER_* variables of the
// metrics that cmd/bootstrap reads itself, all of both modes.
func bootstrapMetricsVariables(t *testing.T) map[string]string {
	t.Helper()
	bootstrapMetricsValues(t) // it reads LAMBDAADAPTER_METRICS
	return map[string]string{"LAMBDAADAPTER_METRICS": "both"}
}

// TestAlarmParameters checks the constraints of the alarm parameters: the
// threshold is a whole number of seconds (the template appends 000 to make
// milliseconds), the topic an SNS topic's ARN.
func TestAlarmParameters(t *testing.T) {
	for _, tc := range []struct {
		param, value string
		ok           bool
	}{
		{"OldestRecordAgeAlarmSeconds", "300", true},
		{"OldestRecordAgeAlarmSeconds", "1", true},
		{"OldestRecordAgeAlarmSeconds", "31536000", true},
		{"OldestRecordAgeAlarmSeconds", "0", false},
		{"OldestRecordAgeAlarmSeconds", "1.5", false},
		{"OldestRecordAgeAlarmSeconds", "-5", false},
		{"OldestRecordAgeAlarmSeconds", "", false},
		{"IteratorAgeAlarmSeconds", "300", true},
		{"IteratorAgeAlarmSeconds", "1", true},
		{"IteratorAgeAlarmSeconds", "0", false},
		{"IteratorAgeAlarmSeconds", "60.5", false},
		{"IteratorAgeAlarmSeconds", "", false},
		{"AlarmTopicArn", alarmTopic, true},
		{"AlarmTopicArn", "arn:aws-cn:sns:cn-north-1:123456789012:ops_alerts-1", true},
		{"AlarmTopicArn", "arn:aws:sqs:eu-west-1:123456789012:oncall", false},
		{"AlarmTopicArn", "oncall", false},
	} {
		p := lambdaMode("Alarms", "true", tc.param, tc.value)
		_, err := template(t).Evaluate(p)
		if (err == nil) != tc.ok {
			t.Errorf("%s=%q: err = %v, want accepted %v", tc.param, tc.value, err, tc.ok)
		}
	}
	if d := scalarString(template(t).Parameters["Alarms"].Default); d != "false" {
		t.Errorf("Alarms defaults to %q; the parameter's description justifies false", d)
	}
}
