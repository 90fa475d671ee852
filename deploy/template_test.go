package deploy

import (
	"errors"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	"github.com/awslabs/goformation/v7/cloudformation/ecs"
	"github.com/awslabs/goformation/v7/cloudformation/sqs"
	"github.com/google/go-cmp/cmp"
)

// TestEveryParameterIsInOneGroup checks the console's parameter groups
// (AWS::CloudFormation::Interface): every parameter in exactly one, no
// group naming a parameter that does not exist, each group's label one
// string (a comma in a YAML flow mapping, {default: a, b}, splits it into
// two keys, which CloudFormation refuses).
func TestEveryParameterIsInOneGroup(t *testing.T) {
	tm := template(t)
	md, _ := tm.Raw["Metadata"].(map[string]any)
	iface, _ := md["AWS::CloudFormation::Interface"].(map[string]any)
	groups, _ := iface["ParameterGroups"].([]any)
	seen := map[string]int{}
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		if label, _ := gm["Label"].(map[string]any); len(label) != 1 || label["default"] == nil {
			t.Errorf("parameter group label %v: want {default: LABEL} alone (quote a label with a comma)", gm["Label"])
		}
		ps, err := stringList(gm["Parameters"])
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			seen[p]++
			if _, ok := tm.Parameters[p]; !ok {
				t.Errorf("parameter group %v names %s, which is no parameter", gm["Label"], p)
			}
		}
	}
	for name := range tm.Parameters {
		if seen[name] != 1 {
			t.Errorf("parameter %s is in %d parameter groups, want 1", name, seen[name])
		}
	}
}

func TestTemplateIsSAM(t *testing.T) {
	tm := template(t)
	if tm.Transform == nil || deref(tm.Transform.String) != "AWS::Serverless-2016-10-31" {
		t.Errorf("Transform = %+v, want AWS::Serverless-2016-10-31", tm.Transform)
	}
	for name, p := range tm.Parameters {
		if p.Default == nil {
			t.Errorf("parameter %s has no default: `sam deploy --guided` should work with the defaults of one mode", name)
		}
		if deref(p.Description) == "" {
			t.Errorf("parameter %s has no description", name)
		}
	}
}

// TestEveryCombination evaluates the template for every combination of the
// choices that change its resources and decodes every resource strictly
// into goformation's type for it: a misspelt property, a reference to a
// resource these parameters leave out, or an intrinsic function this
// package cannot evaluate fails here.
func TestEveryCombination(t *testing.T) {
	eachCombination(t, func(c combination) {
		s, err := template(t).Evaluate(c.params)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			return
		}
		if err := decodeAll(s); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	})
}

func TestModesCreateOnlyTheirResources(t *testing.T) {
	both := []string{"AWS::SQS::Queue", "AWS::Kinesis::Stream"}
	lambdaOnly := []string{"AWS::Serverless::Function"}
	ecsOnly := []string{"AWS::ECS::Cluster", "AWS::ECS::Service", "AWS::ECS::TaskDefinition", "AWS::DynamoDB::Table"}
	eachCombination(t, func(c combination) {
		s, err := template(t).Evaluate(c.params)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ecsMode := c.params["Mode"] == "ecs"
		for id, r := range s.Resources {
			switch {
			case ecsMode && (strings.HasPrefix(r.Type, "AWS::Lambda::") || strings.HasPrefix(r.Type, "AWS::Serverless::")):
				t.Errorf("%s: ecs mode creates %s (%s)", c.name, id, r.Type)
			case !ecsMode && id != "IdempotencyTable" && (strings.HasPrefix(r.Type, "AWS::ECS::") || strings.HasPrefix(r.Type, "AWS::DynamoDB::")):
				t.Errorf("%s: lambda mode creates %s (%s)", c.name, id, r.Type)
			}
		}
		want := append(slices.Clone(both), lambdaOnly...)
		if ecsMode {
			want = append(slices.Clone(both), ecsOnly...)
		}
		if c.params["StreamArn"] != "" && c.params["DeadLetterTarget"] != "stream" && c.params["CreateReplyStream"] != "true" {
			want = slices.DeleteFunc(want, func(s string) bool { return s == "AWS::Kinesis::Stream" })
		}
		for _, typ := range want {
			if len(idsOfType(s, typ)) == 0 {
				t.Errorf("%s: no %s", c.name, typ)
			}
		}
		// Roles: the function's in lambda mode; the task's and the
		// execution role in ecs mode.
		roles := idsOfType(s, "AWS::IAM::Role")
		wantRoles := []string{"FunctionRole"}
		if ecsMode {
			wantRoles = []string{"TaskExecutionRole", "TaskRole"}
		}
		if !slices.Equal(roles, wantRoles) {
			t.Errorf("%s: roles %q, want %q", c.name, roles, wantRoles)
		}
	})
}

func TestFunction(t *testing.T) {
	s := evaluate(t, lambdaMode())
	codeURI, fn, _ := function(t, s)
	if codeURI != "." {
		t.Errorf("CodeUri = %q, want . (the module root, for the makefile build)", codeURI)
	}
	if got := s.Resources[functionID].Metadata["BuildMethod"]; got != "makefile" {
		t.Errorf("Metadata.BuildMethod = %v, want makefile", got)
	}
	if deref(fn.Runtime) != "provided.al2023" || deref(fn.Handler) != "bootstrap" {
		t.Errorf("Runtime %q, Handler %q: want provided.al2023, bootstrap", deref(fn.Runtime), deref(fn.Handler))
	}
	if !slices.Equal(fn.Architectures, []string{"arm64"}) {
		t.Errorf("default Architectures = %q, want [arm64]", fn.Architectures)
	}
	if fn.Role != "${FunctionRole.Arn}" {
		t.Errorf("Role = %q, want the template's FunctionRole (no role generated by SAM)", fn.Role)
	}
	if fn.LoggingConfig == nil || deref(fn.LoggingConfig.LogGroup) != "${FunctionLogGroup}" {
		t.Errorf("LoggingConfig = %+v, want the log group FunctionLogGroup (the role may write there only)", fn.LoggingConfig)
	}
	if _, ok := s.Resources[functionID].Properties["Policies"]; ok {
		t.Error("the function has SAM Policies: grant through FunctionRole so that the IAM checks see every statement")
	}

	_, fn, _ = function(t, evaluate(t, lambdaMode("Architecture", "x86_64", "FunctionTimeout", "77", "FunctionMemorySize", "1536")))
	if !slices.Equal(fn.Architectures, []string{"x86_64"}) || deref(fn.Timeout) != 77 || deref(fn.MemorySize) != 1536 {
		t.Errorf("Architectures %q, Timeout %d, MemorySize %d: want the parameters x86_64, 77, 1536",
			fn.Architectures, deref(fn.Timeout), deref(fn.MemorySize))
	}
}

// TestMakefileBuildsTheFunction checks that the root Makefile has the target
// `sam build` runs for each function built with BuildMethod makefile.
func TestMakefileBuildsTheFunction(t *testing.T) {
	s := evaluate(t, lambdaMode())
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(mk), "\n")
	n := 0
	for _, id := range idsOfType(s, "AWS::Serverless::Function") {
		if s.Resources[id].Metadata["BuildMethod"] != "makefile" {
			continue
		}
		n++
		target := "build-" + id
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, target+":") })
		if i < 0 {
			t.Errorf("the root Makefile has no target %s: `sam build` (BuildMethod: makefile, CodeUri: .) runs `make %s` with ARTIFACTS_DIR set", target, target)
			continue
		}
		var recipe strings.Builder
		for _, l := range lines[i+1:] {
			if !strings.HasPrefix(l, "\t") {
				break
			}
			recipe.WriteString(l)
		}
		for _, want := range []string{"$(ARTIFACTS_DIR)/bootstrap", "./cmd/bootstrap", "CGO_ENABLED=0", "GOOS=linux", "lambda.norpc"} {
			if !strings.Contains(recipe.String(), want) {
				t.Errorf("recipe of %s does not contain %q:\n%s", target, want, recipe.String())
			}
		}
	}
	if n == 0 {
		t.Error("no function is built with BuildMethod makefile")
	}
}

func TestKinesisEventSource(t *testing.T) {
	for _, stream := range []string{"", existingStreamARN} {
		_, _, events := function(t, evaluate(t, lambdaMode("StreamArn", stream)))
		ks := eventsOfType(events, "Kinesis")
		if len(ks) != 1 {
			t.Fatalf("StreamArn=%q: %d Kinesis events, want 1", stream, len(ks))
		}
		m := ks[0].Mapping
		if got, want := deref(m.EventSourceArn), sourceStream(map[string]string{"StreamArn": stream}); got != want {
			t.Errorf("StreamArn=%q: the event source reads %q, want %q", stream, got, want)
		}
		if !slices.Contains(m.FunctionResponseTypes, "ReportBatchItemFailures") {
			t.Errorf("Kinesis event: FunctionResponseTypes = %q: without ReportBatchItemFailures Lambda ignores the adapter's answer", m.FunctionResponseTypes)
		}
		// The safe defaults: Lambda discards nothing and does not bisect.
		if deref(m.MaximumRetryAttempts) != -1 || deref(m.MaximumRecordAgeInSeconds) != -1 || m.BisectBatchOnFunctionError == nil || *m.BisectBatchOnFunctionError {
			t.Errorf("defaults MaximumRetryAttempts %v, MaximumRecordAgeInSeconds %v, BisectBatchOnFunctionError %v: want -1, -1, false",
				deref(m.MaximumRetryAttempts), deref(m.MaximumRecordAgeInSeconds), deref(m.BisectBatchOnFunctionError))
		}
		if deref(m.StartingPosition) != "LATEST" {
			t.Errorf("default StartingPosition %q", deref(m.StartingPosition))
		}
	}

	_, _, events := function(t, evaluate(t, lambdaMode(
		"BatchSize", "500", "MaximumBatchingWindowInSeconds", "5", "ParallelizationFactor", "4", "StartingPosition", "TRIM_HORIZON",
		"MaximumRetryAttempts", "7", "MaximumRecordAgeInSeconds", "3600", "BisectBatchOnFunctionError", "true")))
	m := eventsOfType(events, "Kinesis")[0].Mapping
	got := []string{
		strconv.Itoa(deref(m.BatchSize)), strconv.Itoa(deref(m.MaximumBatchingWindowInSeconds)), strconv.Itoa(deref(m.ParallelizationFactor)),
		deref(m.StartingPosition), strconv.Itoa(deref(m.MaximumRetryAttempts)), strconv.Itoa(deref(m.MaximumRecordAgeInSeconds)),
		strconv.FormatBool(deref(m.BisectBatchOnFunctionError)),
	}
	if diff := cmp.Diff([]string{"500", "5", "4", "TRIM_HORIZON", "7", "3600", "true"}, got); diff != "" {
		t.Errorf("event source properties do not follow their parameters (-want +got):\n%s", diff)
	}
}

func TestDelayQueueEventSource(t *testing.T) {
	s := evaluate(t, lambdaMode())
	_, fn, events := function(t, s)
	qs := eventsOfType(events, "SQS")
	if len(qs) != 1 {
		t.Fatalf("%d SQS events, want 1: the delay queue must be mapped back to the function, or durable delays stay in the queue", len(qs))
	}
	m := qs[0].Mapping
	if got := deref(m.EventSourceArn); got != "${"+delayQueue+".Arn}" {
		t.Errorf("the SQS event source reads %q, want the delay queue ${%s.Arn}", got, delayQueue)
	}
	if !slices.Contains(m.FunctionResponseTypes, "ReportBatchItemFailures") {
		t.Errorf("SQS event: FunctionResponseTypes = %q: without ReportBatchItemFailures a message the adapter could not forward is deleted", m.FunctionResponseTypes)
	}
	if got := fn.Environment.Variables["LAMBDAADAPTER_DELAY_QUEUE"]; got != "${"+delayQueue+"}" {
		t.Errorf("LAMBDAADAPTER_DELAY_QUEUE = %q, want the URL of the mapped queue ${%s}", got, delayQueue)
	}
	q := &sqs.Queue{}
	if err := s.Decode(delayQueue, q); err != nil {
		t.Fatal(err)
	}
	if vt := deref(q.VisibilityTimeout); vt < deref(fn.Timeout) {
		t.Errorf("delay queue VisibilityTimeout %d < function Timeout %d: CloudFormation refuses the event source mapping", vt, deref(fn.Timeout))
	}
}

func TestDeadLetterTargetAndReplyStream(t *testing.T) {
	for _, mode := range []map[string]string{lambdaMode(), ecsMode()} {
		for _, tc := range []struct {
			target         string
			stream, queue  bool
			envVar, envVal string
		}{
			{"stream", true, false, "LAMBDAADAPTER_DEAD_LETTER_STREAM", "${DeadLetterStream.Arn}"},
			{"queue", false, true, "LAMBDAADAPTER_DEAD_LETTER_QUEUE", "${DeadLetterQueue}"},
			{"none", false, false, "", ""},
		} {
			s := evaluate(t, params(mode, "DeadLetterTarget", tc.target))
			_, hasStream := s.Resources["DeadLetterStream"]
			_, hasQueue := s.Resources["DeadLetterQueue"]
			if hasStream != tc.stream || hasQueue != tc.queue {
				t.Errorf("%s DeadLetterTarget=%s: dead-letter stream %v, queue %v; want %v, %v", mode["Mode"], tc.target, hasStream, hasQueue, tc.stream, tc.queue)
			}
			env := modeEnv(t, s)
			for _, v := range []string{"LAMBDAADAPTER_DEAD_LETTER_STREAM", "LAMBDAADAPTER_DEAD_LETTER_QUEUE"} {
				got, set := env[v]
				if v == tc.envVar {
					if got != tc.envVal {
						t.Errorf("%s DeadLetterTarget=%s: %s = %q, want %q", mode["Mode"], tc.target, v, got, tc.envVal)
					}
				} else if set {
					t.Errorf("%s DeadLetterTarget=%s: %s is set (%q): both targets is an error at New", mode["Mode"], tc.target, v, got)
				}
			}
		}
		for _, create := range []bool{false, true} {
			s := evaluate(t, params(mode, "CreateReplyStream", strconv.FormatBool(create)))
			_, has := s.Resources["ReplyStream"]
			got, set := modeEnv(t, s)["LAMBDAADAPTER_REPLY_STREAM"]
			if has != create || set != create || (create && got != "${ReplyStream.Arn}") {
				t.Errorf("%s CreateReplyStream=%v: stream %v, LAMBDAADAPTER_REPLY_STREAM %q (set %v)", mode["Mode"], create, has, got, set)
			}
		}
	}
}

func TestExistingStream(t *testing.T) {
	for _, mode := range []map[string]string{lambdaMode(), ecsMode()} {
		s := evaluate(t, params(mode, "StreamArn", existingStreamARN))
		if _, ok := s.Resources["Stream"]; ok {
			t.Errorf("%s: StreamArn given, but the stack creates a stream", mode["Mode"])
		}
		if got := s.Outputs["SourceStreamName"]; got != "orders" {
			t.Errorf("%s: SourceStreamName = %v, want orders", mode["Mode"], got)
		}
	}
	env := ecsEnv(t, evaluate(t, ecsMode("StreamArn", existingStreamARN)))
	if env["LAMBDAADAPTER_STREAM"] != "orders" || env["LAMBDAADAPTER_STREAM_ARN"] != existingStreamARN {
		t.Errorf("ecs: LAMBDAADAPTER_STREAM %q, LAMBDAADAPTER_STREAM_ARN %q; want orders, %s",
			env["LAMBDAADAPTER_STREAM"], env["LAMBDAADAPTER_STREAM_ARN"], existingStreamARN)
	}
	env = ecsEnv(t, evaluate(t, ecsMode()))
	if env["LAMBDAADAPTER_STREAM"] != "${Stream}" || env["LAMBDAADAPTER_STREAM_ARN"] != "${Stream.Arn}" {
		t.Errorf("ecs: LAMBDAADAPTER_STREAM %q, LAMBDAADAPTER_STREAM_ARN %q; want the created stream", env["LAMBDAADAPTER_STREAM"], env["LAMBDAADAPTER_STREAM_ARN"])
	}
}

// Worst case of a graceful stop in long-running mode beyond the shutdown
// timeout (consumer.shutdown): records settle for up to the shutdown
// timeout; handlers that ignore their cancelled context get as long again
// (engine Session.Stop); then the final checkpoint and the release are one
// lease-table write each, bounded by storeTimeout = LeaseDuration/3 (the
// template keeps the default lease duration of 10 s).
const (
	fargateMaxStopTimeout = 120
	leaseWriteSeconds     = 10.0 / 3
)

func TestECSTask(t *testing.T) {
	s := evaluate(t, ecsMode())
	td, c := container(t, s)
	cmdline := append(slices.Clone(c.EntryPoint), c.Command...)
	if len(cmdline) == 0 || cmdline[0] != "/bootstrap" || !slices.Contains(cmdline, "-mode=ecs") {
		t.Errorf("container command line %q, want /bootstrap -mode=ecs", cmdline)
	}
	if want := dockerEntrypoint(t); !slices.Equal(cmdline, want) {
		t.Errorf("container command line %q differs from the Dockerfile's ENTRYPOINT %q", cmdline, want)
	}
	if c.Image != ecsParams["ContainerImage"] {
		t.Errorf("Image = %q, want the ContainerImage parameter", c.Image)
	}
	if !slices.Equal(td.RequiresCompatibilities, []string{"FARGATE"}) || deref(td.NetworkMode) != "awsvpc" {
		t.Errorf("RequiresCompatibilities %q, NetworkMode %q", td.RequiresCompatibilities, deref(td.NetworkMode))
	}
	if deref(td.TaskRoleArn) != "${TaskRole.Arn}" || deref(td.ExecutionRoleArn) != "${TaskExecutionRole.Arn}" {
		t.Errorf("TaskRoleArn %q, ExecutionRoleArn %q", deref(td.TaskRoleArn), deref(td.ExecutionRoleArn))
	}
	if lc := c.LogConfiguration; lc == nil || lc.LogDriver != "awslogs" || lc.Options["awslogs-group"] != "${TaskLogGroup}" {
		t.Errorf("LogConfiguration %+v, want awslogs to TaskLogGroup", lc)
	}
	for _, tc := range []struct{ arch, want string }{{"arm64", "ARM64"}, {"x86_64", "X86_64"}} {
		td, _ := container(t, evaluate(t, ecsMode("Architecture", tc.arch)))
		if td.RuntimePlatform == nil || deref(td.RuntimePlatform.CpuArchitecture) != tc.want {
			t.Errorf("Architecture=%s: RuntimePlatform %+v, want %s", tc.arch, td.RuntimePlatform, tc.want)
		}
	}

	// StopTimeout: longer than the whole graceful stop, for the default
	// shutdown timeout and for the largest the parameter allows.
	p := template(t).Parameters["ShutdownTimeoutSeconds"]
	if p.MaxValue == nil {
		t.Fatal("ShutdownTimeoutSeconds has no MaxValue")
	}
	for _, secs := range []string{"", strconv.Itoa(int(*p.MaxValue))} {
		pp := ecsMode()
		if secs != "" {
			pp["ShutdownTimeoutSeconds"] = secs
		}
		s := evaluate(t, pp)
		_, c := container(t, s)
		stop := deref(c.StopTimeout)
		raw := ecsEnv(t, s)["LAMBDAADAPTER_SHUTDOWN_TIMEOUT"]
		shutdown, err := parseDuration(raw)
		if err != nil {
			t.Fatalf("LAMBDAADAPTER_SHUTDOWN_TIMEOUT=%q: %v", raw, err)
		}
		if worst := 2*shutdown + 2*leaseWriteSeconds; float64(stop) <= worst || stop > fargateMaxStopTimeout {
			t.Errorf("StopTimeout %d with LAMBDAADAPTER_SHUTDOWN_TIMEOUT=%s: want more than %.1f s (2 x shutdown + 2 lease writes) and at most %d",
				stop, raw, worst, fargateMaxStopTimeout)
		}
	}

	svc := &ecs.Service{}
	if err := s.Decode("Service", svc); err != nil {
		t.Fatal(err)
	}
	if deref(svc.Cluster) != "${Cluster}" || deref(svc.TaskDefinition) != "${TaskDefinition}" || deref(svc.LaunchType) != "FARGATE" {
		t.Errorf("service Cluster %q, TaskDefinition %q, LaunchType %q", deref(svc.Cluster), deref(svc.TaskDefinition), deref(svc.LaunchType))
	}
	net := svc.NetworkConfiguration
	if net == nil || net.AwsvpcConfiguration == nil || !slices.Equal(net.AwsvpcConfiguration.Subnets, []string{"subnet-0aaa", "subnet-0bbb"}) {
		t.Errorf("service network %+v, want the Subnets parameter", net)
	} else if net.AwsvpcConfiguration.SecurityGroups != nil || deref(net.AwsvpcConfiguration.AssignPublicIp) != "DISABLED" {
		t.Errorf("default SecurityGroups %q (want none: the VPC's default), AssignPublicIp %q", net.AwsvpcConfiguration.SecurityGroups, deref(net.AwsvpcConfiguration.AssignPublicIp))
	}
	s = evaluate(t, ecsMode("DesiredCount", "5", "SecurityGroups", "sg-1,sg-2", "AssignPublicIp", "ENABLED"))
	svc = &ecs.Service{}
	if err := s.Decode("Service", svc); err != nil {
		t.Fatal(err)
	}
	a := svc.NetworkConfiguration.AwsvpcConfiguration
	if deref(svc.DesiredCount) != 5 || !slices.Equal(a.SecurityGroups, []string{"sg-1", "sg-2"}) || deref(a.AssignPublicIp) != "ENABLED" {
		t.Errorf("DesiredCount %d, SecurityGroups %q, AssignPublicIp %q: want the parameters 5, [sg-1 sg-2], ENABLED",
			deref(svc.DesiredCount), a.SecurityGroups, deref(a.AssignPublicIp))
	}
}

// parseDuration parses a Go duration such as "10s" into seconds.
func parseDuration(s string) (float64, error) {
	m := regexp.MustCompile(`^([0-9]+)(ms|s|m)$`).FindStringSubmatch(s)
	if m == nil {
		return 0, errors.New("not a duration of whole ms, s or m")
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	return n * map[string]float64{"ms": 0.001, "s": 1, "m": 60}[m[2]], nil
}

// TestLeaseTable checks the table against the key schema lease.DynamoDB
// checks (lease/dynamodb.go: CreateTable and Check).
func TestLeaseTable(t *testing.T) {
	s := evaluate(t, ecsMode())
	tbl := &dynamodb.Table{}
	if err := s.Decode("LeaseTable", tbl); err != nil {
		t.Fatal(err)
	}
	key := leaseKeyAttribute(t)
	if deref(tbl.BillingMode) != "PAY_PER_REQUEST" {
		t.Errorf("BillingMode %q, want PAY_PER_REQUEST", deref(tbl.BillingMode))
	}
	if len(tbl.KeySchema) != 1 || tbl.KeySchema[0].AttributeName != key || tbl.KeySchema[0].KeyType != "HASH" {
		t.Errorf("KeySchema %+v, want only the hash key %s", tbl.KeySchema, key)
	}
	if len(tbl.AttributeDefinitions) != 2 || tbl.AttributeDefinitions[0].AttributeName != key || tbl.AttributeDefinitions[0].AttributeType != "S" ||
		tbl.AttributeDefinitions[1].AttributeName != "leaseOwner" || tbl.AttributeDefinitions[1].AttributeType != "S" {
		t.Errorf("AttributeDefinitions %+v, want %s and leaseOwner of type S", tbl.AttributeDefinitions, key)
	}
	// The owner index lease.DynamoDB.Owned queries (CreateTable creates it).
	if len(tbl.GlobalSecondaryIndexes) != 1 {
		t.Fatalf("GlobalSecondaryIndexes %+v, want the owner index", tbl.GlobalSecondaryIndexes)
	}
	gsi := tbl.GlobalSecondaryIndexes[0]
	if gsi.IndexName != "leaseOwner-index" || len(gsi.KeySchema) != 1 || gsi.KeySchema[0].AttributeName != "leaseOwner" || gsi.KeySchema[0].KeyType != "HASH" ||
		gsi.Projection == nil || deref(gsi.Projection.ProjectionType) != "KEYS_ONLY" {
		t.Errorf("owner index %+v, want leaseOwner-index: hash key leaseOwner, projection KEYS_ONLY", gsi)
	}
	if got := ecsEnv(t, s)["LAMBDAADAPTER_LEASE_TABLE"]; got != "${LeaseTable}" {
		t.Errorf("LAMBDAADAPTER_LEASE_TABLE = %q, want the table", got)
	}
}

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]string
		want   []string // rule names that fail
	}{
		{"lambda defaults", lambdaMode(), nil},
		{"ecs complete", ecsMode(), nil},
		{"ecs without image or subnets", map[string]string{"Mode": "ecs"}, []string{"EcsNeedsImageAndSubnets", "EcsNeedsImageAndSubnets"}},
		{"ecs with an empty subnet", ecsMode("Subnets", "subnet-0aaa,"), []string{"EcsNeedsImageAndSubnets"}},
		{"drops without a target", lambdaMode("DeadLetterDrops", "true", "DeadLetterTarget", "none"), []string{"DropsNeedDeadLetterTarget"}},
		{"drops with a target", lambdaMode("DeadLetterDrops", "true"), nil},
		{"alarms without metrics", ecsMode("Alarms", "true", "Metrics", "off"), []string{"AlarmsNeedMetrics"}},
		{"alarms with metrics", ecsMode("Alarms", "true"), nil},
		{"metrics off without alarms", lambdaMode("Metrics", "off"), nil},
		{"a topic without alarms", lambdaMode("AlarmTopicArn", alarmTopic), []string{"AlarmTopicNeedsAlarms"}},
		{"a topic with alarms", lambdaMode("AlarmTopicArn", alarmTopic, "Alarms", "true"), nil},
		{"autoscaling without metrics", ecsMode("AutoScaling", "true", "Metrics", "off"), []string{"AutoScalingNeedsMetrics"}},
		{"autoscaling in lambda mode", lambdaMode("AutoScaling", "true"), []string{"AutoScalingNeedsEcs"}},
		{"autoscaling in lambda mode without metrics", lambdaMode("AutoScaling", "true", "Metrics", "off"), []string{"AutoScalingNeedsEcs", "AutoScalingNeedsMetrics"}},
		{"autoscaling with metrics", ecsMode("AutoScaling", "true"), nil},
		{"autoscaling with metrics and alarms", ecsMode("AutoScaling", "true", "Alarms", "true"), nil},
		{"metrics off without autoscaling", ecsMode("Metrics", "off"), nil},
	} {
		_, err := template(t).Evaluate(tc.params)
		var re *RuleError
		var got []string
		if errors.As(err, &re) {
			for _, f := range re.Failed {
				name, _, _ := strings.Cut(f, ":")
				got = append(got, name)
			}
		} else if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: failed rules %q, want %q (%v)", tc.name, got, tc.want, err)
		}
	}
}

func TestOutputs(t *testing.T) {
	always := []string{"SourceStreamName", "SourceStreamArn", "DelayQueueUrl", "DelayRedriveQueueUrl"}
	lambdaOut := []string{"FunctionName", "FunctionArn", "FunctionLogGroupName"}
	ecsOut := []string{"ClusterName", "ServiceName", "LeaseTableName", "LeasesCommand", "TaskLogGroupName"}
	eachCombination(t, func(c combination) {
		s, err := template(t).Evaluate(c.params)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := slices.Clone(always)
		if c.params["Mode"] == "ecs" {
			want = append(want, ecsOut...)
		} else {
			want = append(want, lambdaOut...)
		}
		switch c.params["DeadLetterTarget"] {
		case "stream":
			want = append(want, "DeadLetterStreamName")
		case "queue":
			want = append(want, "DeadLetterQueueUrl")
		}
		if c.params["CreateReplyStream"] == "true" {
			want = append(want, "ReplyStreamName")
		}
		if c.params["Idempotency"] != "" {
			want = append(want, "IdempotencyTableName")
		}
		if c.params["Alarms"] == "true" {
			want = append(want, "AlarmNames")
		}
		if c.params["FanOutConsumerName"] != "" {
			want = append(want, "FanOutConsumerArn")
		}
		slices.Sort(want)
		var got []string
		for name := range s.Outputs {
			got = append(got, name)
		}
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: outputs (-want +got):\n%s", c.name, diff)
		}
	})
}

// leaseSource is where lease.DynamoDB creates and checks its table.
const leaseSource = "../lease/dynamodb.go"

// leaseKeyAttribute returns the hash key lease.DynamoDB uses: the constant
// attrKey of leaseSource, after checking that CreateTable makes it the only
// key, a string, with on-demand billing.
func leaseKeyAttribute(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(leaseSource)
	if err != nil {
		t.Fatal(err)
	}
	f, err := goparser.ParseFile(token.NewFileSet(), leaseSource, src, goparser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	key := ""
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, name := range vs.Names {
				if name.Name == "attrKey" && i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
						key, _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
		return true
	})
	if key == "" {
		t.Fatalf("no constant attrKey in %s", leaseSource)
	}
	for _, want := range []string{"types.BillingModePayPerRequest", "AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS",
		"AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash"} {
		if !strings.Contains(string(src), want) {
			t.Fatalf("%s no longer contains %q: check the lease table of template.yaml against CreateTable and update this test", leaseSource, want)
		}
	}
	return key
}
