package deploy

import (
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/goformation/v7/cloudformation/kinesis"
)

// envSource is where lambdaadapter.Environment reads the LAMBDAADAPTER_*
// variables; its doc comment has a table of them with the mode each belongs
// to.
const envSource = "../env.go"

// adapterVariables reads envSource: every variable with its mode (both,
// lambda or ecs), and those read as durations and as whole numbers.
func adapterVariables(t *testing.T) (modes map[string]string, durations, numbers []string) {
	t.Helper()
	src, err := os.ReadFile(envSource)
	if err != nil {
		t.Fatal(err)
	}
	modes = map[string]string{}
	row := regexp.MustCompile(`(?m)^//\s+(LAMBDAADAPTER_[A-Z_]+)\s+\S.*\s(both|lambda|ecs)\s*$`)
	for _, m := range row.FindAllStringSubmatch(string(src), -1) {
		modes[m[1]] = m[2]
	}
	for _, m := range regexp.MustCompile(`"(LAMBDAADAPTER_[A-Z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		if _, ok := modes[m[1]]; !ok {
			t.Fatalf("%s reads %s, which its table of variables does not list (with its mode)", envSource, m[1])
		}
	}
	if len(modes) < 10 {
		t.Fatalf("found only %d variables in the table of %s; has its format changed?", len(modes), envSource)
	}
	for _, m := range regexp.MustCompile(`\bdur\("(LAMBDAADAPTER_[A-Z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		durations = append(durations, m[1])
	}
	for _, m := range regexp.MustCompile(`\bnum\("(LAMBDAADAPTER_[A-Z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		numbers = append(numbers, m[1])
	}
	return modes, durations, numbers
}

// TestEnvironmentIsTheAdapters checks, in every combination, that each
// LAMBDAADAPTER_* variable the template sets is one the adapter reads in
// that mode, with a value it accepts.
func TestEnvironmentIsTheAdapters(t *testing.T) {
	modes, durations, numbers := adapterVariables(t)
	maps.Copy(modes, bootstrapVariables(t))
	maps.Copy(modes, bootstrapMetricsVariables(t))
	metricsValues := bootstrapMetricsValues(t)
	eachCombination(t, func(c combination) {
		s := evaluate(t, c.params)
		mode, _ := s.Params["Mode"].(string)
		for name, v := range modeEnv(t, s) {
			if !strings.HasPrefix(name, "LAMBDAADAPTER_") {
				continue
			}
			m, ok := modes[name]
			switch {
			case !ok:
				t.Errorf("%s: %s is not a variable the adapter reads", c.name, name)
				continue
			case m != "both" && m != mode:
				t.Errorf("%s: %s belongs to %s mode; setting it in %s mode is an error at New", c.name, name, m, mode)
			case name == "LAMBDAADAPTER_MODE":
				t.Errorf("%s: LAMBDAADAPTER_MODE is set; the mode is the binary's: -mode=ecs on ECS, Lambda by default", c.name)
			}
			if err := checkValue(name, v, durations, numbers); err != nil {
				t.Errorf("%s: %s=%q: %v", c.name, name, v, err)
			}
			if name == "LAMBDAADAPTER_METRICS" && !slices.Contains(metricsValues, v) {
				t.Errorf("%s: %s=%q: cmd/bootstrap accepts %q", c.name, name, v, metricsValues)
			}
		}
	})
}

// checkValue reports a value lambdaadapter.Environment would refuse.
func checkValue(name, v string, durations, numbers []string) error {
	switch {
	case slices.Contains(durations, name):
		d, err := time.ParseDuration(v)
		if err == nil && d <= 0 {
			err = strconv.ErrRange
		}
		return err
	case slices.Contains(numbers, name):
		n, err := strconv.Atoi(v)
		if err == nil && n < 1 {
			err = strconv.ErrRange
		}
		return err
	case name == "LAMBDAADAPTER_LOG_LEVEL":
		var l slog.Level
		return l.UnmarshalText([]byte(v))
	case name == "LAMBDAADAPTER_DEAD_LETTER_DROPS":
		if v != "true" && v != "false" {
			return strconv.ErrSyntax
		}
	case name == "LAMBDAADAPTER_START":
		if !strings.EqualFold(v, "latest") && !strings.EqualFold(v, "trim_horizon") {
			_, err := time.Parse(time.RFC3339Nano, v)
			return err
		}
	}
	return nil
}

// TestEnvironmentComesFromParametersOrResources checks the unevaluated
// template: every LAMBDAADAPTER_* value is a parameter, a resource or built
// from one, in every branch of its Fn::If; none is written into the
// template.
func TestEnvironmentComesFromParametersOrResources(t *testing.T) {
	tm := template(t)
	resources := tm.Raw["Resources"].(map[string]any)
	names := map[string]bool{}
	for n := range tm.Parameters {
		names[n] = true
	}
	for n := range resources {
		names[n] = true
	}
	check := func(where, name string, expr any) {
		if !strings.HasPrefix(name, "LAMBDAADAPTER_") {
			return
		}
		for _, leaf := range leaves(expr) {
			if !refersTo(leaf, names) {
				t.Errorf("%s: %s = %v is neither a parameter nor a resource", where, name, leaf)
			}
		}
	}
	n := 0
	for id, raw := range resources {
		r := raw.(map[string]any)
		props, _ := r["Properties"].(map[string]any)
		switch r["Type"] {
		case "AWS::Serverless::Function":
			env, _ := props["Environment"].(map[string]any)
			vars, _ := env["Variables"].(map[string]any)
			for name, expr := range vars {
				n++
				check(id, name, expr)
			}
		case "AWS::ECS::TaskDefinition":
			cds, _ := props["ContainerDefinitions"].([]any)
			for _, cd := range cds {
				env, _ := cd.(map[string]any)["Environment"].([]any)
				for _, entry := range env {
					for _, kv := range leaves(entry) {
						m, ok := kv.(map[string]any)
						if !ok {
							t.Errorf("%s: environment entry %v", id, kv)
							continue
						}
						name, _ := m["Name"].(string)
						n++
						check(id, name, m["Value"])
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("found no environment variables in the template")
	}
}

// leaves returns the values expr can take: the branches of its Fn::If
// (recursively), without AWS::NoValue.
func leaves(expr any) []any {
	m, ok := expr.(map[string]any)
	if !ok || len(m) != 1 {
		return []any{expr}
	}
	if ref, ok := m["Ref"]; ok && ref == "AWS::NoValue" {
		return nil
	}
	if args, ok := m["Fn::If"].([]any); ok && len(args) == 3 {
		return append(leaves(args[1]), leaves(args[2])...)
	}
	return []any{expr}
}

// refersTo reports whether expr refers to one of names (Ref, Fn::GetAtt or
// an Fn::Sub variable, anywhere in it).
func refersTo(expr any, names map[string]bool) bool {
	switch x := expr.(type) {
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return refersTo(e, names) })
	case map[string]any:
		for k, v := range x {
			switch k {
			case "Ref":
				if s, ok := v.(string); ok && names[s] {
					return true
				}
			case "Fn::GetAtt":
				l, _ := stringList(v)
				if len(l) > 0 && names[strings.Split(l[0], ".")[0]] {
					return true
				}
			case "Fn::Sub":
				src := v
				if l, ok := v.([]any); ok && len(l) > 0 {
					src = l[0]
					if refersTo(l[1:], names) {
						return true
					}
				}
				s, _ := src.(string)
				for _, m := range subVar.FindAllStringSubmatch(s, -1) {
					if names[strings.Split(m[1], ".")[0]] {
						return true
					}
				}
			}
			if refersTo(v, names) {
				return true
			}
		}
	}
	return false
}

// adapterGroup is the label of the parameter group whose every parameter
// must reach the adapter's environment.
const adapterGroup = "Adapter (LAMBDAADAPTER_* environment)"

// wiring says, for each parameter that configures the adapter, a value to
// set and what the environment of each mode then holds. Keep it complete:
// TestAdapterParametersReachTheEnvironment fails for a parameter of the
// adapter group without a row.
var wiring = []struct {
	param, value string
	variable     string
	want         string
	modes        []string
}{
	{"Concurrency", "7", "LAMBDAADAPTER_CONCURRENCY", "7", []string{"lambda", "ecs"}},
	{"DeadlineMargin", "750ms", "LAMBDAADAPTER_DEADLINE_MARGIN", "750ms", []string{"lambda"}},
	{"MaxAttempts", "9", "LAMBDAADAPTER_MAX_ATTEMPTS", "9", []string{"lambda", "ecs"}},
	{"MaxInProcessDelay", "2s", "LAMBDAADAPTER_MAX_INPROCESS_DELAY", "2s", []string{"lambda", "ecs"}},
	{"DeadLetterTarget", "queue", "LAMBDAADAPTER_DEAD_LETTER_QUEUE", "${DeadLetterQueue}", []string{"lambda", "ecs"}},
	{"DeadLetterDrops", "true", "LAMBDAADAPTER_DEAD_LETTER_DROPS", "true", []string{"lambda", "ecs"}},
	{"CreateReplyStream", "true", "LAMBDAADAPTER_REPLY_STREAM", "${ReplyStream.Arn}", []string{"lambda", "ecs"}},
	{"LogLevel", "debug", "LAMBDAADAPTER_LOG_LEVEL", "debug", []string{"lambda", "ecs"}},
	{"ShutdownTimeoutSeconds", "25", "LAMBDAADAPTER_SHUTDOWN_TIMEOUT", "25s", []string{"ecs"}},
	// Read by cmd/bootstrap (observe/emf).
	{"Metrics", "off", "LAMBDAADAPTER_METRICS", "off", []string{"lambda", "ecs"}},
	// Not in the adapter group (it sets the event source too), but the
	// long-running mode's start position.
	{"StartingPosition", "TRIM_HORIZON", "LAMBDAADAPTER_START", "TRIM_HORIZON", []string{"ecs"}},
	// Not in the adapter group either (in lambda mode it makes the event
	// source read as a stream consumer instead, see fanout_test.go).
	{"FanOutConsumerName", fanOutName, "LAMBDAADAPTER_EFO_CONSUMER", fanOutName, []string{"ecs"}},
}

func TestAdapterParametersReachTheEnvironment(t *testing.T) {
	group := adapterParameterGroup(t)
	var rows []string
	for _, w := range wiring {
		rows = append(rows, w.param)
	}
	for _, p := range group {
		if !slices.Contains(rows, p) {
			t.Errorf("parameter %s of the group %q has no row in wiring", p, adapterGroup)
		}
	}
	for _, w := range wiring {
		for _, mode := range []string{"lambda", "ecs"} {
			base := lambdaMode()
			if mode == "ecs" {
				base = ecsMode()
			}
			before := modeEnv(t, evaluate(t, base))
			s := evaluate(t, params(base, w.param, w.value))
			after := modeEnv(t, s)
			got, set := after[w.variable]
			got = consumerName(t, s, got)
			if !slices.Contains(w.modes, mode) {
				if set {
					t.Errorf("%s mode: %s=%s sets %s", mode, w.param, w.value, w.variable)
				}
				continue
			}
			if got != w.want {
				t.Errorf("%s mode: %s=%s gives %s=%q (set %v), want %q", mode, w.param, w.value, w.variable, got, set, w.want)
			}
			if before[w.variable] == w.want {
				t.Errorf("%s mode: %s=%q already by default; choose another value for %s", mode, w.variable, w.want, w.param)
			}
		}
	}
}

// adapterParameterGroup returns the parameters of the adapter group of
// the template's AWS::CloudFormation::Interface.
func adapterParameterGroup(t *testing.T) []string {
	t.Helper()
	md, _ := template(t).Raw["Metadata"].(map[string]any)
	iface, _ := md["AWS::CloudFormation::Interface"].(map[string]any)
	groups, _ := iface["ParameterGroups"].([]any)
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		label, _ := gm["Label"].(map[string]any)
		if label["default"] == adapterGroup {
			ps, err := stringList(gm["Parameters"])
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if _, ok := template(t).Parameters[p]; !ok {
					t.Errorf("parameter group %q names %s, which is no parameter", adapterGroup, p)
				}
			}
			return ps
		}
	}
	t.Fatalf("no parameter group %q", adapterGroup)
	return nil
}

// TestEveryModeSetsTheEssentials checks the variables each mode cannot do
// without (or that the template promises).
func TestEveryModeSetsTheEssentials(t *testing.T) {
	common := []string{"LAMBDAADAPTER_CONCURRENCY", "LAMBDAADAPTER_MAX_ATTEMPTS", "LAMBDAADAPTER_MAX_INPROCESS_DELAY",
		"LAMBDAADAPTER_DEAD_LETTER_STREAM", "LAMBDAADAPTER_DEAD_LETTER_DROPS", "LAMBDAADAPTER_DELAY_QUEUE", "LAMBDAADAPTER_LOG_LEVEL",
		"LAMBDAADAPTER_METRICS", "POWERTOOLS_SERVICE_NAME"}
	want := map[string][]string{
		"lambda": append(slices.Clone(common), "LAMBDAADAPTER_DEADLINE_MARGIN"),
		"ecs": append(slices.Clone(common), "LAMBDAADAPTER_STREAM", "LAMBDAADAPTER_STREAM_ARN", "LAMBDAADAPTER_LEASE_TABLE",
			"LAMBDAADAPTER_START", "LAMBDAADAPTER_SHUTDOWN_TIMEOUT"),
	}
	for mode, vars := range want {
		base := lambdaMode()
		if mode == "ecs" {
			base = ecsMode()
		}
		env := modeEnv(t, evaluate(t, base))
		for _, v := range vars {
			if _, ok := env[v]; !ok {
				t.Errorf("%s mode (defaults): %s is not set; have %q", mode, v, slices.Sorted(maps.Keys(env)))
			}
		}
	}
}

// consumerName resolves a stream consumer's name attribute
// (${Resource.ConsumerName}, which the evaluation leaves symbolic) to the
// ConsumerName the template gives that resource; any other value is
// returned as it is.
func consumerName(t *testing.T, s *Stack, v string) string {
	t.Helper()
	res, ok := strings.CutSuffix(v, ".ConsumerName}")
	if !ok || !strings.HasPrefix(res, "${") {
		return v
	}
	c := &kinesis.StreamConsumer{}
	if err := s.Decode(res[2:], c); err != nil {
		t.Fatalf("%s: %v", v, err)
	}
	return c.ConsumerName
}
