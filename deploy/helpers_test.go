package deploy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/ecs"
	"github.com/awslabs/goformation/v7/cloudformation/lambda"
)

// templatePath is the template under test, relative to this package.
const templatePath = "../template.yaml"

// Logical ids of template.yaml the tests look at.
const (
	functionID       = "AdapterFunction"
	delayQueue       = "DelayQueue"
	fanOutConsumerID = "FanOutConsumer"
)

// fanOutName is the FanOutConsumerName of the cases that read with enhanced
// fan-out.
const fanOutName = "orders-adapter"

// alarmTopic is the AlarmTopicArn of the cases with a topic.
const alarmTopic = "arn:aws:sns:eu-west-1:123456789012:oncall"

// existingStreamARN is the StreamArn of the cases that consume an existing
// stream.
const existingStreamARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"

// ecsParams are the parameters every ecs-mode case needs (the Rules refuse
// Mode=ecs without them).
var ecsParams = map[string]string{
	"Mode":           "ecs",
	"ContainerImage": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/lambdaadapter:v1",
	"Subnets":        "subnet-0aaa,subnet-0bbb",
}

var loadTemplate = sync.OnceValues(func() (*Template, error) { return Load(templatePath) })

// template returns the parsed template under test.
func template(t *testing.T) *Template {
	t.Helper()
	tm, err := loadTemplate()
	if err != nil {
		t.Fatalf("Load(%s): %v", templatePath, err)
	}
	return tm
}

// params returns base with the key/value pairs kv set.
func params(base map[string]string, kv ...string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// lambdaMode and ecsMode are the parameters of the default case of each mode
// with kv set.
func lambdaMode(kv ...string) map[string]string { return params(nil, kv...) }
func ecsMode(kv ...string) map[string]string    { return params(ecsParams, kv...) }

// evaluate evaluates the template under test with p.
func evaluate(t *testing.T, p map[string]string) *Stack {
	t.Helper()
	s, err := template(t).Evaluate(p)
	if err != nil {
		t.Fatalf("Evaluate(%v): %v", p, err)
	}
	return s
}

// combination is one set of parameters of the combinations every
// invariant is checked on.
type combination struct {
	name   string
	params map[string]string
}

// combinations returns the cross product of the choices that change which
// resources exist, for both modes.
func combinations() []combination {
	var out []combination
	for _, mode := range []string{"lambda", "ecs"} {
		for _, dlt := range []string{"stream", "queue", "none"} {
			for _, reply := range []string{"false", "true"} {
				for _, stream := range []string{"", existingStreamARN} {
					for _, arch := range []string{"arm64", "x86_64"} {
						for _, attempts := range []string{"3", ""} {
							base := lambdaMode()
							repos, groups := []string{""}, []string{""}
							if mode == "ecs" {
								base = ecsMode()
								repos, groups = []string{"", "lambdaadapter"}, []string{"", "sg-0123,sg-0456"}
							}
							for _, repo := range repos {
								for _, sg := range groups {
									p := params(base, "DeadLetterTarget", dlt, "CreateReplyStream", reply, "StreamArn", stream,
										"Architecture", arch, "MaxAttempts", attempts)
									if mode == "ecs" {
										p["ImageRepository"], p["SecurityGroups"] = repo, sg
									}
									out = append(out, combination{name: describe(p), params: p})
								}
							}
						}
					}
				}
			}
		}
	}
	out = append(out, idempotencyCombinations()...)
	out = append(out, autoScalingCombinations()...)
	out = append(out, multiStreamCombinations()...)
	return append(out, observabilityCombinations()...)
}

// describe names a parameter set for a subtest.
func describe(p map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		v := p[k]
		if k == "StreamArn" && v != "" {
			v = "existing"
		}
		if k == "AdditionalStreamArns" && v != "" {
			v = fmt.Sprintf("%d-more", len(strings.Split(v, ",")))
		}
		if k == "ContainerImage" || k == "Subnets" {
			continue
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

// function returns the evaluated Lambda function and its events.
func function(t *testing.T, s *Stack) (string, *lambda.Function, map[string]Event) {
	t.Helper()
	codeURI, fn, events, err := s.Function(functionID)
	if err != nil {
		t.Fatal(err)
	}
	return codeURI, fn, events
}

// eventsOfType returns the events of type typ.
func eventsOfType(events map[string]Event, typ string) []Event {
	var out []Event
	for _, name := range slices.Sorted(maps.Keys(events)) {
		if events[name].Type == typ {
			out = append(out, events[name])
		}
	}
	return out
}

// container returns the one container of the ECS task definition.
func container(t *testing.T, s *Stack) (*ecs.TaskDefinition, ecs.TaskDefinition_ContainerDefinition) {
	t.Helper()
	td := &ecs.TaskDefinition{}
	if err := s.Decode(resourceOfType(t, s, "AWS::ECS::TaskDefinition"), td); err != nil {
		t.Fatal(err)
	}
	if len(td.ContainerDefinitions) != 1 {
		t.Fatalf("task definition has %d containers, want 1", len(td.ContainerDefinitions))
	}
	return td, td.ContainerDefinitions[0]
}

// resourceOfType returns the logical id of the one resource of type typ.
func resourceOfType(t *testing.T, s *Stack, typ string) string {
	t.Helper()
	ids := idsOfType(s, typ)
	if len(ids) != 1 {
		t.Fatalf("want one %s, got %q", typ, ids)
	}
	return ids[0]
}

// idsOfType returns the logical ids of the resources of type typ.
func idsOfType(s *Stack, typ string) []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(s.Resources)) {
		if s.Resources[id].Type == typ {
			out = append(out, id)
		}
	}
	return out
}

// lambdaEnv returns the function's environment (nil in ecs mode).
func lambdaEnv(t *testing.T, s *Stack) map[string]string {
	t.Helper()
	if _, ok := s.Resources[functionID]; !ok {
		return nil
	}
	_, fn, _ := function(t, s)
	if fn.Environment == nil {
		return map[string]string{}
	}
	return fn.Environment.Variables
}

// ecsEnv returns the container's environment (nil in lambda mode).
func ecsEnv(t *testing.T, s *Stack) map[string]string {
	t.Helper()
	if len(idsOfType(s, "AWS::ECS::TaskDefinition")) == 0 {
		return nil
	}
	_, c := container(t, s)
	env := map[string]string{}
	for _, kv := range c.Environment {
		if kv.Name == nil || kv.Value == nil {
			t.Fatalf("container environment entry without name or value: %+v", kv)
		}
		if _, dup := env[*kv.Name]; dup {
			t.Fatalf("container environment sets %s twice", *kv.Name)
		}
		env[*kv.Name] = *kv.Value
	}
	return env
}

// modeEnv returns the adapter's environment in s's mode.
func modeEnv(t *testing.T, s *Stack) map[string]string {
	t.Helper()
	if s.Params["Mode"] == "ecs" {
		return ecsEnv(t, s)
	}
	return lambdaEnv(t, s)
}

// sourceStream is the ARN of the consumed stream as the stack names it.
func sourceStream(p map[string]string) string {
	if p["StreamArn"] != "" {
		return p["StreamArn"]
	}
	return "${Stream.Arn}"
}

// decodeAll decodes every resource of s into goformation's type for it.
func decodeAll(s *Stack) error {
	var errs []error
	all := cloudformation.AllResources()
	for _, id := range slices.Sorted(maps.Keys(s.Resources)) {
		typ := s.Resources[id].Type
		if typ == "AWS::Serverless::Function" {
			if _, _, _, err := s.Function(id); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		r, ok := all[typ]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: goformation has no type %s", id, typ))
			continue
		}
		if err := s.Decode(id, r); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// deref returns *p, or the zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// eachCombination calls f with every combination, and stops after the
// first one that fails (the messages name it).
func eachCombination(t *testing.T, f func(c combination)) {
	t.Helper()
	for _, c := range combinations() {
		f(c)
		if t.Failed() {
			t.Logf("stopped after the first failing combination")
			return
		}
	}
}
