package deploy

import (
	"bytes"
	"context"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/goformation/v7/cloudformation/applicationautoscaling"
	"github.com/awslabs/goformation/v7/cloudformation/ecs"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/observe/emf"
)

// Autoscaling on lag (AutoScaling=true, ecs mode): an Application Auto
// Scaling scalable target on the service's desired count and a target
// tracking policy on the MillisBehindLatest the adapter writes (why that
// metric: the comment above the resources in template.yaml). The policy's
// metric is checked against observe/emf's Exporter as the alarms are
// (alarms_test.go), and further against what it writes for an idle stream:
// target tracking scales in only on data points, so the metric must have
// them when there is nothing to read.

// Logical ids of the scaling resources.
const (
	scalableTargetID = "ScalableTarget"
	scalingPolicyID  = "LagScalingPolicy"
)

// scalingTypes are the resource types of Application Auto Scaling.
var scalingTypes = map[string]string{
	scalableTargetID: "AWS::ApplicationAutoScaling::ScalableTarget",
	scalingPolicyID:  "AWS::ApplicationAutoScaling::ScalingPolicy",
}

// autoScalingCombinations are the cases of combinations() with autoscaling:
// ecs mode without and with it (the parameters' defaults, and other
// values), polling and fan-out, a created and an existing stream, with
// and without further streams (AdditionalStreamArns), and with alarms.
func autoScalingCombinations() []combination {
	var out []combination
	for _, fan := range []string{"", fanOutName} {
		for _, stream := range []string{"", existingStreamARN} {
			for _, more := range []string{"", twoMoreStreams} {
				for _, scaling := range [][]string{
					{"AutoScaling", "false"},
					{"AutoScaling", "true"},
					{"AutoScaling", "true", "AutoScalingMinTasks", "2", "AutoScalingMaxTasks", "8", "AutoScalingTargetSeconds", "30",
						"AutoScalingScaleInCooldownSeconds", "600", "AutoScalingScaleOutCooldownSeconds", "0",
						"Alarms", "true", "AlarmTopicArn", alarmTopic, "DesiredCount", "3"},
				} {
					// Every choice of combinations() explicit, as the checks
					// read them from the parameters.
					kv := []string{"FanOutConsumerName", fan, "StreamArn", stream, "DeadLetterTarget", "stream",
						"CreateReplyStream", "false", "Architecture", "arm64", "MaxAttempts", "3", "Idempotency", "",
						"Metrics", "emf", "ImageRepository", "", "SecurityGroups", "", "AdditionalStreamArns", more}
					p := ecsMode(append(kv, scaling...)...)
					out = append(out, combination{name: describe(p), params: p})
				}
			}
		}
	}
	return out
}

// autoScaling reports whether a stack with parameters p scales its service.
func autoScaling(p map[string]string) bool {
	return p["Mode"] == "ecs" && p["AutoScaling"] == "true"
}

// TestAutoScaling checks, in every combination, the scaling resources:
// both exist only in ecs mode with AutoScaling=true; the service then has
// no DesiredCount (a stack update would reset the scaled count), else
// the parameter's; the scalable target is the service's desired count
// (ResourceId service/CLUSTER/SERVICE of this stack's cluster and
// service), between AutoScalingMinTasks and AutoScalingMaxTasks, with no
// RoleARN (the service-linked role) and nothing scheduled or suspended;
// the policy tracks the target, on MillisBehindLatest (Maximum, in the
// exporter's namespace, with the service and Stream dimensions of this
// stack) at AutoScalingTargetSeconds in milliseconds, scales in, and has
// the cooldowns of the parameters.
func TestAutoScaling(t *testing.T) {
	n := 0
	eachCombination(t, func(c combination) {
		s := evaluate(t, c.params)
		on := autoScaling(c.params)
		var got []string
		for _, id := range slices.Sorted(maps.Keys(s.Resources)) {
			if r := s.Resources[id]; strings.HasPrefix(r.Type, "AWS::ApplicationAutoScaling::") || scalingTypes[id] != "" {
				got = append(got, id)
				if scalingTypes[id] != r.Type {
					t.Errorf("%s: %s is a %s", c.name, id, r.Type)
				}
			}
		}
		var want []string
		if on {
			want = slices.Sorted(maps.Keys(scalingTypes))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: scaling resources %q, want %q", c.name, got, want)
		}
		if c.params["Mode"] != "ecs" {
			return
		}
		svc := &ecs.Service{}
		if err := s.Decode("Service", svc); err != nil {
			t.Fatal(err)
		}
		if on {
			if svc.DesiredCount != nil {
				t.Errorf("%s: the service has DesiredCount %d with AutoScaling=true: every stack update would reset the count Application Auto Scaling set", c.name, *svc.DesiredCount)
			}
		} else if got, want := strconv.Itoa(deref(svc.DesiredCount)), s.Params["DesiredCount"]; svc.DesiredCount == nil || got != want {
			t.Errorf("%s: service DesiredCount %s (set %v), want the parameter %s", c.name, got, svc.DesiredCount != nil, want)
		}
		if !on {
			return
		}
		n++
		checkScalableTarget(t, c.name, s, svc)
		checkScalingPolicy(t, c.name, s)
	})
	if n == 0 && !t.Failed() {
		t.Fatal("no combination with autoscaling")
	}
}

// checkScalableTarget checks the scalable target of s, whose service is svc.
func checkScalableTarget(t *testing.T, at string, s *Stack, svc *ecs.Service) {
	t.Helper()
	st := &applicationautoscaling.ScalableTarget{}
	if err := s.Decode(scalableTargetID, st); err != nil {
		t.Fatal(err)
	}
	// The cluster the service runs in, and the service, by name: Ref of an
	// AWS::ECS::Cluster is its name, Service.Name the service's.
	if s.Resources["Cluster"].Type != "AWS::ECS::Cluster" || deref(svc.Cluster) != "${Cluster}" || s.Resources["Service"].Type != "AWS::ECS::Service" {
		t.Fatalf("%s: the checks expect the service Service in the cluster Cluster", at)
	}
	got := []any{st.ServiceNamespace, st.ScalableDimension, st.ResourceId, strconv.Itoa(st.MinCapacity), strconv.Itoa(st.MaxCapacity)}
	want := []any{"ecs", "ecs:service:DesiredCount", "service/${Cluster}/${Service.Name}", s.Params["AutoScalingMinTasks"], s.Params["AutoScalingMaxTasks"]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: scalable target [namespace dimension resource min max] (-want +got):\n%s", at, diff)
	}
	if st.RoleARN != nil {
		t.Errorf("%s: scalable target RoleARN %q: leave it out, Application Auto Scaling then uses its service-linked role AWSServiceRoleForApplicationAutoScaling_ECSService", at, *st.RoleARN)
	}
	if st.ScheduledActions != nil || st.SuspendedState != nil {
		t.Errorf("%s: scalable target with scheduled actions %+v or suspended state %+v", at, st.ScheduledActions, st.SuspendedState)
	}
}

// checkScalingPolicy checks the target tracking policy of s.
func checkScalingPolicy(t *testing.T, at string, s *Stack) {
	t.Helper()
	p := &applicationautoscaling.ScalingPolicy{}
	if err := s.Decode(scalingPolicyID, p); err != nil {
		t.Fatal(err)
	}
	if p.PolicyType != "TargetTrackingScaling" || deref(p.ScalingTargetId) != "${"+scalableTargetID+"}" || p.StepScalingPolicyConfiguration != nil {
		t.Errorf("%s: policy type %q on %q (step configuration %v): want TargetTrackingScaling on ${%s}", at, p.PolicyType, deref(p.ScalingTargetId), p.StepScalingPolicyConfiguration != nil, scalableTargetID)
	}
	if p.ResourceId != nil || p.ScalableDimension != nil || p.ServiceNamespace != nil {
		t.Errorf("%s: the policy names its target twice (ScalingTargetId and ResourceId, ScalableDimension or ServiceNamespace)", at)
	}
	tt := p.TargetTrackingScalingPolicyConfiguration
	if tt == nil || tt.CustomizedMetricSpecification == nil || tt.PredefinedMetricSpecification != nil {
		t.Fatalf("%s: want a target tracking configuration on a customized metric, got %+v", at, tt)
	}
	m := tt.CustomizedMetricSpecification
	dims := map[string]string{}
	for _, d := range m.Dimensions {
		dims[d.Name] = d.Value
	}
	if diff := cmp.Diff(watchedDims(s), dims); diff != "" {
		t.Errorf("%s: policy metric dimensions (-want +got):\n%s", at, diff)
	}
	got := []any{deref(m.Namespace), deref(m.MetricName), deref(m.Statistic), deref(m.Unit), len(m.Metrics), tt.TargetValue, deref(tt.DisableScaleIn)}
	want := []any{emf.DefaultNamespace, "MillisBehindLatest", "Maximum", "", 0, secondsParam(s.Params, "AutoScalingTargetSeconds") * 1000, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: policy [namespace metric statistic unit metrics target(ms) disable-scale-in] (-want +got):\n%s", at, diff)
	}
	if tt.ScaleInCooldown == nil || strconv.Itoa(*tt.ScaleInCooldown) != s.Params["AutoScalingScaleInCooldownSeconds"] ||
		tt.ScaleOutCooldown == nil || strconv.Itoa(*tt.ScaleOutCooldown) != s.Params["AutoScalingScaleOutCooldownSeconds"] {
		t.Errorf("%s: cooldowns in %v, out %v: want the parameters %s and %s", at, deref(tt.ScaleInCooldown), deref(tt.ScaleOutCooldown),
			s.Params["AutoScalingScaleInCooldownSeconds"], s.Params["AutoScalingScaleOutCooldownSeconds"])
	}
	if _, c := container(t, s); tt.ScaleInCooldown != nil && *tt.ScaleInCooldown < deref(c.StopTimeout) {
		t.Errorf("%s: ScaleInCooldown %d < StopTimeout %d: a scale-in could be decided while the tasks of the last one still hand over", at, *tt.ScaleInCooldown, deref(c.StopTimeout))
	}
}

// policyMetric returns the metric the scaling policy of s tracks.
func policyMetric(t *testing.T, s *Stack) metricKey {
	t.Helper()
	p := &applicationautoscaling.ScalingPolicy{}
	if err := s.Decode(scalingPolicyID, p); err != nil {
		t.Fatal(err)
	}
	m := p.TargetTrackingScalingPolicyConfiguration.CustomizedMetricSpecification
	dims := map[string]string{}
	for _, d := range m.Dimensions {
		dims[d.Name] = d.Value
	}
	return metricKey{namespace: deref(m.Namespace), name: deref(m.MetricName), dims: dimString(dims)}
}

// TestAutoScalingTracksWhatTheAdapterWrites runs observe/emf's Exporter as
// the tasks run it (the environment the template sets) and checks that the
// scaling policy tracks a metric it writes, in Milliseconds (the unit of the
// target value), both under load (exporterMetrics: every event behind the
// alarms) and for an idle stream: one empty GetRecords at the tip
// (MillisBehindLatest 0) and the snapshot a task reports before each flush,
// nothing in flight. Target tracking scales in only on data points below
// the target, so a metric missing while the stream is idle would never let
// the service scale in after a burst.
func TestAutoScalingTracksWhatTheAdapterWrites(t *testing.T) {
	n := 0
	for _, c := range autoScalingCombinations() {
		if !autoScaling(c.params) {
			continue
		}
		n++
		s := evaluate(t, c.params)
		k := policyMetric(t, s)
		for _, run := range []struct {
			name    string
			written map[metricKey]string
		}{
			{"under load", exporterMetrics(t, s)},
			{"idle", idleExporterMetrics(t, s)},
		} {
			unit, ok := run.written[k]
			switch {
			case !ok:
				t.Errorf("%s: %s: the policy tracks %+v, which the exporter does not write; it writes:\n%s", c.name, run.name, k, describeMetrics(run.written))
			case unit != "Milliseconds":
				t.Errorf("%s: %s: the exporter writes %s in %s, the target value is in Milliseconds", c.name, run.name, k.name, unit)
			}
		}
	}
	if n == 0 {
		t.Fatal("no combination with autoscaling")
	}
}

// idleExporterMetrics returns the metrics the adapter of ecs-mode stack s
// writes in an interval in which its one reader found nothing to read.
func idleExporterMetrics(t *testing.T, s *Stack) map[metricKey]string {
	t.Helper()
	env := ecsEnv(t, s)
	var out bytes.Buffer
	e := emf.New(&out, append(emf.Environment(func(name string) string { return env[name] }),
		emf.WithClock(func() time.Time { return time.Unix(1_700_000_000, 0) }))...)
	for _, st := range ecsStreams(t, s) {
		e.OnRead(observe.Read{Stream: st.name, ShardID: "shardId-000000000000", Records: 0, MillisBehindLatest: 0})
		e.OnInFlight(observe.InFlight{Stream: st.arn, Records: 0, LeasesHeld: 1})
	}
	e.Flush(context.Background())
	return parseEMF(t, out.Bytes())
}

// writeRoundSource is where long-running mode sets the bound of one round
// of the engine's writes, which a stopping task waits for (at most the
// longer of it and the shutdown timeout) after the shutdown timeout.
const writeRoundSource = "../internal/consumer/delays.go"

// writeRoundSeconds reads writeTimeout from writeRoundSource, after checking
// that the consumer gives it to its engine session.
func writeRoundSeconds(t *testing.T) float64 {
	t.Helper()
	src, err := os.ReadFile(writeRoundSource)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\bwriteTimeout\s*=\s*([0-9]+) \* time\.Second`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s no longer sets writeTimeout in whole seconds; update this test and the template's StopTimeout comment", writeRoundSource)
	}
	consumer, err := os.ReadFile("../internal/consumer/consumer.go")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`WriteTimeout:\s*writeTimeout,`).Match(consumer) {
		t.Fatal("internal/consumer/consumer.go no longer gives writeTimeout to its engine session; update this test")
	}
	secs, _ := strconv.ParseFloat(string(m[1]), 64)
	return secs
}

// TestAutoScalingScaleInIsGraceful checks that a scale-in stops tasks no
// faster than they hand over: ECS stops a task it scales in as any other
// (SIGTERM, SIGKILL StopTimeout seconds later), so with autoscaling on the
// container's StopTimeout must exceed the whole graceful stop for every
// ShutdownTimeoutSeconds the parameter allows - records settle for the
// shutdown timeout, then handlers and writes under way get the longer of
// it and a write round, then the final checkpoint and the release are one
// lease-table write each - and the scale-in cooldown must allow no lower
// than StopTimeout.
func TestAutoScalingScaleInIsGraceful(t *testing.T) {
	round := writeRoundSeconds(t)
	p := template(t).Parameters["ShutdownTimeoutSeconds"]
	if p.MinValue == nil || p.MaxValue == nil {
		t.Fatal("ShutdownTimeoutSeconds has no MinValue or MaxValue")
	}
	var stop int
	for secs := int(*p.MinValue); secs <= int(*p.MaxValue); secs++ {
		s := evaluate(t, ecsMode("AutoScaling", "true", "ShutdownTimeoutSeconds", strconv.Itoa(secs)))
		_, c := container(t, s)
		stop = deref(c.StopTimeout)
		raw := ecsEnv(t, s)["LAMBDAADAPTER_SHUTDOWN_TIMEOUT"]
		shutdown, err := parseDuration(raw)
		if err != nil {
			t.Fatalf("LAMBDAADAPTER_SHUTDOWN_TIMEOUT=%q: %v", raw, err)
		}
		if worst := shutdown + max(shutdown, round) + 2*leaseWriteSeconds; float64(stop) <= worst || stop > fargateMaxStopTimeout {
			t.Errorf("StopTimeout %d with LAMBDAADAPTER_SHUTDOWN_TIMEOUT=%s: a scale-in would kill a task before its hand-over ends (%.1f s: shutdown + max(shutdown, %.0f s write round) + 2 lease writes; at most %d)",
				stop, raw, worst, round, fargateMaxStopTimeout)
		}
	}
	cool := template(t).Parameters["AutoScalingScaleInCooldownSeconds"]
	if cool.MinValue == nil || int(*cool.MinValue) < stop {
		t.Errorf("AutoScalingScaleInCooldownSeconds MinValue %v: want at least the StopTimeout %d, so that a scale-in's hand-overs end before the next one is decided", deref(cool.MinValue), stop)
	}
}

// TestAutoScalingParameters checks the constraints of the autoscaling
// parameters and that AutoScaling is off by default.
func TestAutoScalingParameters(t *testing.T) {
	for _, tc := range []struct {
		param, value string
		ok           bool
	}{
		{"AutoScaling", "true", true},
		{"AutoScaling", "yes", false},
		{"AutoScalingMinTasks", "1", true},
		// No task writes no MillisBehindLatest: the policy could never
		// scale out again.
		{"AutoScalingMinTasks", "0", false},
		{"AutoScalingMaxTasks", "64", true},
		{"AutoScalingMaxTasks", "0", false},
		{"AutoScalingTargetSeconds", "1", true},
		{"AutoScalingTargetSeconds", "600", true},
		{"AutoScalingTargetSeconds", "0", false},
		{"AutoScalingTargetSeconds", "1.5", false},
		{"AutoScalingTargetSeconds", "", false},
		{"AutoScalingScaleInCooldownSeconds", "120", true},
		{"AutoScalingScaleInCooldownSeconds", "119", false},
		{"AutoScalingScaleOutCooldownSeconds", "0", true},
		{"AutoScalingScaleOutCooldownSeconds", "-1", false},
	} {
		_, err := template(t).Evaluate(ecsMode("AutoScaling", "true", tc.param, tc.value))
		if (err == nil) != tc.ok {
			t.Errorf("%s=%q: err = %v, want accepted %v", tc.param, tc.value, err, tc.ok)
		}
	}
	if d := scalarString(template(t).Parameters["AutoScaling"].Default); d != "false" {
		t.Errorf("AutoScaling defaults to %q, want false", d)
	}
}

// TestAutoScalingNeedsNoIAM checks that autoscaling adds no IAM resource
// and no grant to the template's roles: Application Auto Scaling acts
// through its service-linked role (no RoleARN, checked by TestAutoScaling),
// and the tasks call nothing of it. Every IAM resource and role policy is
// the same with and without it.
func TestAutoScalingNeedsNoIAM(t *testing.T) {
	for _, c := range autoScalingCombinations() {
		if !autoScaling(c.params) {
			continue
		}
		with := evaluate(t, c.params)
		without := evaluate(t, params(c.params, "AutoScaling", "false"))
		iamOf := func(s *Stack) map[string]*Resource {
			out := map[string]*Resource{}
			for id, r := range s.Resources {
				if strings.HasPrefix(r.Type, "AWS::IAM::") {
					out[id] = r
				}
			}
			return out
		}
		if diff := cmp.Diff(iamOf(without), iamOf(with)); diff != "" {
			t.Errorf("%s: AutoScaling=true changes the IAM resources (-without +with):\n%s", c.name, diff)
		}
	}
}
