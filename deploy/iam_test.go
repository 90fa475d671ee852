package deploy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/cloudformation/iam"
	"github.com/google/go-cmp/cmp"
)

// The allow-list: every IAM action a role of template.yaml may be granted,
// and why.

// adapterCall is one AWS operation of the library's code: its client
// method, the IAM action that authorises it, the modes that call it with
// the template's configuration, and where. Every operation the code has a
// client method for must have a row (TestEveryAdapterCallIsListed); a row
// with notGranted is one the template deliberately does not grant. A row
// of one way of reading (readingOnly) is granted only when the stack reads
// that way.
type adapterCall struct {
	op, action string
	modes      []string
	file       string // calls op, relative to the module root
	why        string
	notGranted string
}

var (
	bothModes = []string{"lambda", "ecs"}
	ecsOnly   = []string{"ecs"}
)

// How the stack reads the stream: polling (GetRecords) or, with the
// parameter FanOutConsumerName, enhanced fan-out (SubscribeToShard).
const (
	polling = "polling"
	fanOut  = "fan-out"
)

// reading returns how a stack with parameters p reads the stream.
func reading(p map[string]string) string {
	if p["FanOutConsumerName"] != "" {
		return fanOut
	}
	return polling
}

// readingOnly names the calls of adapterCalls (by op) and serviceCalls (by
// role and action) that belong to one way of reading: the template grants
// them only when the stack reads that way.
var readingOnly = map[string]string{
	"kinesis.GetRecords":                          polling, // consumer.shard.fetch
	"kinesis.DescribeStreamConsumer":              fanOut,
	"kinesis.RegisterStreamConsumer":              fanOut,
	"kinesis.SubscribeToShard":                    fanOut,
	"FunctionRole kinesis:DescribeStreamConsumer": fanOut,
	"FunctionRole kinesis:SubscribeToShard":       fanOut,
}

// granted reports whether the stack with parameters p reads the way a call
// of key (an op, or "role action") needs.
func granted(key string, p map[string]string) bool {
	r, ok := readingOnly[key]
	return !ok || r == reading(p)
}

var adapterCalls = []adapterCall{
	{"kinesis.PutRecords", "kinesis:PutRecords", bothModes, "internal/publish/publisher.go",
		"counted copies to the record's own stream, dead letters to a stream, forwarded delays (batched)", ""},
	{"kinesis.PutRecord", "kinesis:PutRecord", bothModes, "internal/publish/publisher.go",
		"replies (Message.Reply), one record each", ""},
	{"sqs.SendMessageBatch", "sqs:SendMessage", bothModes, "internal/publish/queue.go",
		"durable delays and SQS dead letters (a batch action is authorised as its single action)", ""},
	{"sqs.SendMessage", "sqs:SendMessage", bothModes, "internal/publish/queue.go",
		"a delay past 15 minutes sent round again", ""},
	{"kinesis.ListShards", "kinesis:ListShards", ecsOnly, "internal/consumer/discover.go", "the shards, at start and every list interval", ""},
	{"kinesis.GetShardIterator", "kinesis:GetShardIterator", ecsOnly, "internal/consumer/reader.go", "one reader per leased shard", ""},
	{"kinesis.GetRecords", "kinesis:GetRecords", ecsOnly, "internal/consumer/reader.go", "one reader per leased shard", ""},
	{"kinesis.DescribeStreamSummary", "kinesis:DescribeStreamSummary", ecsOnly, "internal/consumer/discover.go",
		"the stream's ARN when only its name is configured",
		"the task is given LAMBDAADAPTER_STREAM_ARN, so resolveStreamARN never calls it"},
	{"kinesis.DescribeStreamConsumer", "kinesis:DescribeStreamConsumer", ecsOnly, "internal/consumer/efo.go",
		"enhanced fan-out (FanOutConsumerName): the stream consumer looked up (and waited for) at start, on the consumer", ""},
	{"kinesis.RegisterStreamConsumer", "kinesis:RegisterStreamConsumer", ecsOnly, "internal/consumer/efo.go",
		"enhanced fan-out (FanOutConsumerName): the stream consumer registered when missing, on the stream", ""},
	{"kinesis.SubscribeToShard", "kinesis:SubscribeToShard", ecsOnly, "internal/consumer/efo.go",
		"enhanced fan-out (FanOutConsumerName): one subscription per leased shard, on the consumer", ""},
	{"sqs.ReceiveMessage", "sqs:ReceiveMessage", ecsOnly, "internal/consumer/delays.go", "the service forwards its own delay queue", ""},
	{"sqs.DeleteMessageBatch", "sqs:DeleteMessage", ecsOnly, "internal/consumer/delays.go",
		"forwarded delay messages (a batch action is authorised as its single action)", ""},
	{"dynamodb.DescribeTable", "dynamodb:DescribeTable", ecsOnly, "lease/dynamodb.go", "Check at Run's start", ""},
	{"dynamodb.GetItem", "dynamodb:GetItem", ecsOnly, "lease/dynamodb.go", "consistent lease reads", ""},
	{"dynamodb.PutItem", "dynamodb:PutItem", ecsOnly, "lease/dynamodb.go", "new leases, worker heartbeats", ""},
	{"dynamodb.UpdateItem", "dynamodb:UpdateItem", ecsOnly, "lease/dynamodb.go", "take, renew, checkpoint, release (conditional)", ""},
	{"dynamodb.DeleteItem", "dynamodb:DeleteItem", ecsOnly, "lease/dynamodb.go", "rows of trimmed shards, worker rows", ""},
	{"dynamodb.Scan", "dynamodb:Scan", ecsOnly, "lease/dynamodb.go", "the leases of a stream", ""},
	{"dynamodb.CreateTable", "dynamodb:CreateTable", nil, "lease/dynamodb.go", "bootstrap leases init",
		"the stack creates the lease table; bootstrap leases init is an operator's command"},
	{"dynamodb.Query", "dynamodb:Query", ecsOnly, "lease/dynamodb.go", "the leases of a worker, from the owner index (Owned)", ""},
	{"dynamodb.UpdateTable", "dynamodb:UpdateTable", nil, "lease/dynamodb.go", "bootstrap leases init on a table without the owner index",
		"the stack creates the lease table with its index; bootstrap leases init is an operator's command"},
}

// serviceCall is an IAM action AWS uses with a role of the template on its
// behalf: the adapter does not call it.
type serviceCall struct {
	role, action, who string
	// star: AWS requires Resource "*" for the action (it has no resource
	// type); the only Resource "*" the checks accept.
	star bool
}

var serviceCalls = []serviceCall{
	{"FunctionRole", "logs:CreateLogStream", "the Lambda runtime (function logs)", false},
	{"FunctionRole", "logs:PutLogEvents", "the Lambda runtime (function logs)", false},
	{"FunctionRole", "kinesis:DescribeStream", "the Kinesis event source mapping", false},
	{"FunctionRole", "kinesis:DescribeStreamSummary", "the Kinesis event source mapping", false},
	{"FunctionRole", "kinesis:ListShards", "the Kinesis event source mapping", false},
	{"FunctionRole", "kinesis:GetShardIterator", "the Kinesis event source mapping", false},
	{"FunctionRole", "kinesis:GetRecords", "the Kinesis event source mapping", false},
	{"FunctionRole", "sqs:ReceiveMessage", "the delay queue's SQS event source mapping", false},
	{"FunctionRole", "sqs:DeleteMessage", "the delay queue's SQS event source mapping", false},
	{"FunctionRole", "sqs:GetQueueAttributes", "the delay queue's SQS event source mapping", false},
	{"FunctionRole", "kinesis:DescribeStreamConsumer", "the Kinesis event source mapping on a stream consumer (enhanced fan-out)", false},
	{"FunctionRole", "kinesis:SubscribeToShard", "the Kinesis event source mapping on a stream consumer (enhanced fan-out)", false},
	{"TaskExecutionRole", "logs:CreateLogStream", "the awslogs log driver", false},
	{"TaskExecutionRole", "logs:PutLogEvents", "the awslogs log driver", false},
	{"TaskExecutionRole", "ecr:BatchGetImage", "ECS pulling the image from ECR", false},
	{"TaskExecutionRole", "ecr:GetDownloadUrlForLayer", "ECS pulling the image from ECR", false},
	{"TaskExecutionRole", "ecr:GetAuthorizationToken", "ECS logging in to ECR", true},
}

// roleMode is the mode the adapter runs in with each role ("" for a role
// the adapter does not run with).
var roleMode = map[string]string{"FunctionRole": "lambda", "TaskRole": "ecs", "TaskExecutionRole": ""}

// trustedService is the service each role trusts.
var trustedService = map[string]string{
	"FunctionRole": "lambda.amazonaws.com", "TaskRole": "ecs-tasks.amazonaws.com", "TaskExecutionRole": "ecs-tasks.amazonaws.com",
}

// allowedActions returns the actions role may be granted in a stack with
// parameters p.
func allowedActions(role string, p map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, c := range adapterCalls {
		if c.notGranted == "" && roleMode[role] != "" && slices.Contains(c.modes, roleMode[role]) && granted(c.op, p) {
			out[c.action] = true
		}
	}
	for _, c := range serviceCalls {
		if c.role == role && granted(c.role+" "+c.action, p) {
			out[c.action] = true
		}
	}
	return out
}

// starActions are the actions for which AWS requires Resource "*".
func starActions() map[string]bool {
	out := map[string]bool{}
	for _, c := range serviceCalls {
		if c.star {
			out[c.action] = true
		}
	}
	return out
}

// resourceService is the ARN service of each resource type a statement
// may name.
var resourceService = map[string]string{
	"AWS::Kinesis::Stream": "kinesis", "AWS::Kinesis::StreamConsumer": "kinesis", "AWS::SQS::Queue": "sqs",
	"AWS::DynamoDB::Table": "dynamodb", "AWS::Logs::LogGroup": "logs",
}

// arnAttribute is the attribute that holds the ARN of each resource type.
var arnAttribute = map[string]string{"AWS::Kinesis::StreamConsumer": "ConsumerARN"}

// symbolicARN matches a resource's ARN as Evaluate writes it.
var symbolicARN = regexp.MustCompile(`^\$\{([A-Za-z0-9]+)\.(Arn|ConsumerARN)\}$`)

// consumerPattern is the one resource with a wildcard the checks accept: the
// stream consumers of a stream by name, whatever their creation time (the
// end of the ARN, which only Kinesis knows when the tasks register the
// consumer themselves): STREAM/consumer/NAME:*.
var consumerPattern = regexp.MustCompile(`^(.+)/consumer/([a-zA-Z0-9_.-]+):\*$`)

// anyConsumerPattern is the wider wildcard the checks accept for the
// streams of AdditionalStreamArns only, with enhanced fan-out: every
// consumer of the stream, STREAM/consumer/* (the template's comment on the
// statement AdditionalFanOutConsumers says why it cannot name the consumer).
var anyConsumerPattern = regexp.MustCompile(`^(arn:[^/]+:stream/[A-Za-z0-9_.-]+)/consumer/\*$`)

// indexPattern is the ARN of a global secondary index of a table of the
// stack, by name: ${Table.Arn}/index/NAME.
var indexPattern = regexp.MustCompile(`^(\$\{[A-Za-z0-9]+\.Arn\})/index/([a-zA-Z0-9_.-]+)$`)

// policyStatements returns every statement of every IAM policy in s, by the
// role it applies to.
func policyStatements(t *testing.T, s *Stack) map[string][]Statement {
	t.Helper()
	out := map[string][]Statement{}
	for _, id := range slices.Sorted(maps.Keys(s.Resources)) {
		r := s.Resources[id]
		switch r.Type {
		case "AWS::IAM::Role":
			role := &iam.Role{}
			if err := s.Decode(id, role); err != nil {
				t.Fatal(err)
			}
			if len(role.ManagedPolicyArns) > 0 {
				t.Errorf("role %s has managed policies %q: their statements escape the checks", id, role.ManagedPolicyArns)
			}
			for _, p := range role.Policies {
				st, err := PolicyStatements(p.PolicyDocument)
				if err != nil {
					t.Fatalf("role %s policy %s: %v", id, p.PolicyName, err)
				}
				out[id] = append(out[id], st...)
			}
			checkTrust(t, id, role.AssumeRolePolicyDocument)
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy", "AWS::IAM::User", "AWS::IAM::Group":
			t.Errorf("%s is a %s: keep every grant inline in the roles, where the checks see it", id, r.Type)
		case "AWS::Serverless::Function":
			for _, k := range []string{"Policies", "Role"} {
				if _, ok := r.Properties[k]; !ok && k == "Role" {
					t.Errorf("function %s has no Role: SAM would generate one with managed policies on every resource", id)
				} else if ok && k == "Policies" {
					t.Errorf("function %s has SAM Policies: grant through its role", id)
				}
			}
		}
	}
	return out
}

// checkTrust checks that a role trusts its service only.
func checkTrust(t *testing.T, role string, doc any) {
	t.Helper()
	st, err := PolicyStatements(doc)
	if err != nil {
		t.Fatalf("role %s trust policy: %v", role, err)
	}
	want, ok := trustedService[role]
	if !ok {
		t.Errorf("role %s: the checks do not know it (add it to trustedService, roleMode and the allow-list)", role)
		return
	}
	for _, s := range st {
		p, _ := s.Principal.(map[string]any)
		if s.Effect != "Allow" || !slices.Equal(s.Action, []string{"sts:AssumeRole"}) || len(p) != 1 || p["Service"] != want {
			t.Errorf("role %s trusts %+v, want %s only", role, s, want)
		}
	}
}

// TestIAMStatements checks every statement of every role in every
// combination: Allow only; actions from the role's allow-list (for the way
// the stack reads the stream); no Resource "*" but for the actions AWS
// requires it for; every resource the ARN of a resource of this stack (or
// the StreamArn, AdditionalStreamArns or ECR repository parameter) of the
// service of the actions, never empty, and no other wildcard than the
// fan-out consumer's creation time (STREAM/consumer/FanOutConsumerName:*)
// and, with fan-out, the consumers of each stream of AdditionalStreamArns
// (STREAM/consumer/*, for DescribeStreamConsumer and SubscribeToShard only).
func TestIAMStatements(t *testing.T) {
	star := starActions()
	eachCombination(t, func(c combination) {
		s := evaluate(t, c.params)
		for role, sts := range policyStatements(t, s) {
			allowed := allowedActions(role, c.params)
			for i, st := range sts {
				at := fmt.Sprintf("%s: %s statement %d (%s)", c.name, role, i, st.Sid)
				if st.Effect != "Allow" || st.NotAction != nil || st.NotResource != nil {
					t.Errorf("%s: want Effect Allow with Action and Resource, got %+v", at, st)
				}
				if len(st.Action) == 0 || len(st.Resource) == 0 {
					t.Errorf("%s: no actions or no resources", at)
				}
				services := map[string]bool{}
				starOK := true
				for _, a := range st.Action {
					if !allowed[a] {
						t.Errorf("%s: action %q is not in the allow-list of %s (deploy/iam_test.go)", at, a, role)
					}
					if strings.Contains(a, "*") {
						t.Errorf("%s: wildcard action %q", at, a)
					}
					services[strings.Split(a, ":")[0]] = true
					starOK = starOK && star[a]
				}
				for _, res := range st.Resource {
					if res == "" {
						t.Errorf("%s: an empty resource in %q", at, st.Resource)
						continue
					}
					if res == "*" {
						if !starOK {
							t.Errorf("%s: Resource \"*\" for %q: scope it to the stack's resources (only %q may have \"*\")", at, st.Action, slices.Sorted(maps.Keys(star)))
						}
						continue
					}
					if m := consumerPattern.FindStringSubmatch(res); m != nil {
						// The fan-out consumer of the source stream, by name.
						if m[1] != sourceStream(c.params) || m[2] != c.params["FanOutConsumerName"] {
							t.Errorf("%s: resource %q: want the consumer %q of the source stream %s", at, res, c.params["FanOutConsumerName"], sourceStream(c.params))
						}
					} else if m := anyConsumerPattern.FindStringSubmatch(res); m != nil {
						// Any consumer of a stream of AdditionalStreamArns.
						if !slices.Contains(additionalStreams(c.params), m[1]) || reading(c.params) != fanOut ||
							!slices.Equal(slices.Sorted(slices.Values(st.Action)), []string{"kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"}) {
							t.Errorf("%s: resource %q for %q: STREAM/consumer/* only for DescribeStreamConsumer and SubscribeToShard on a stream of AdditionalStreamArns %q, with fan-out", at, res, st.Action, additionalStreams(c.params))
						}
					} else if strings.Contains(res, "*") {
						t.Errorf("%s: wildcard in resource %q", at, res)
					}
					svc, err := arnService(s, res)
					if err != nil {
						t.Errorf("%s: %v", at, err)
						continue
					}
					if len(services) != 1 || !services[svc] {
						t.Errorf("%s: resource %q (%s) does not belong to the service of %q", at, res, svc, st.Action)
					}
				}
			}
		}
	})
}

// arnService returns the service of a statement's resource: a resource of
// the stack (${Id.Arn}) or an ARN.
func arnService(s *Stack, res string) (string, error) {
	if m := consumerPattern.FindStringSubmatch(res); m != nil {
		res = m[1] // a stream's consumers: the stream's service
	} else if m := anyConsumerPattern.FindStringSubmatch(res); m != nil {
		res = m[1]
	}
	if m := indexPattern.FindStringSubmatch(res); m != nil {
		res = m[1] // a table's index: the table's service
	}
	if m := symbolicARN.FindStringSubmatch(res); m != nil {
		r, ok := s.Resources[m[1]]
		if !ok {
			return "", fmt.Errorf("resource %q: no such resource", res)
		}
		svc, ok := resourceService[r.Type]
		if !ok {
			return "", fmt.Errorf("resource %q is a %s, which no statement should name", res, r.Type)
		}
		want := arnAttribute[r.Type]
		if want == "" {
			want = "Arn"
		}
		if m[2] != want {
			return "", fmt.Errorf("resource %q: the ARN of a %s is its attribute %s", res, r.Type, want)
		}
		return svc, nil
	}
	// ${AWS::Partition} and friends hold colons of their own.
	plain := regexp.MustCompile(`\$\{AWS::[A-Za-z]+\}`).ReplaceAllString(res, "pseudo")
	parts := strings.SplitN(plain, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" {
		return "", fmt.Errorf("resource %q is neither a resource of the stack nor an ARN", res)
	}
	return parts[2], nil
}

// TestIAMGrants checks, in every combination, exactly which action each
// role may take on which resource.
func TestIAMGrants(t *testing.T) {
	eachCombination(t, func(c combination) {
		s := evaluate(t, c.params)
		got := map[string]map[string][]string{} // role → action → resources
		for role, sts := range policyStatements(t, s) {
			got[role] = map[string][]string{}
			for _, st := range sts {
				for _, a := range st.Action {
					got[role][a] = append(got[role][a], st.Resource...)
				}
			}
			for a := range got[role] {
				slices.Sort(got[role][a])
				got[role][a] = slices.Compact(got[role][a])
			}
		}
		if diff := cmp.Diff(wantGrants(c.params), got); diff != "" {
			t.Errorf("%s: grants (-want +got):\n%s", c.name, diff)
		}
	})
}

// wantGrants is what each role of the stack may do with parameters p.
func wantGrants(p map[string]string) map[string]map[string][]string {
	source := sourceStream(p)
	sorted := func(l ...string) []string { slices.Sort(l); return l }
	writes := []string{source}
	if p["DeadLetterTarget"] == "stream" {
		writes = append(writes, "${DeadLetterStream.Arn}")
	}
	if p["CreateReplyStream"] == "true" {
		writes = append(writes, "${ReplyStream.Arn}")
	}
	sends := []string{"${DelayQueue.Arn}"}
	if p["DeadLetterTarget"] == "queue" {
		sends = append(sends, "${DeadLetterQueue.Arn}")
	}
	delay := []string{"${DelayQueue.Arn}"}
	if p["Mode"] != "ecs" {
		logs := []string{"${FunctionLogGroup.Arn}"}
		fn := map[string][]string{
			"logs:CreateLogStream": logs, "logs:PutLogEvents": logs,
			"kinesis:DescribeStream": {source}, "kinesis:DescribeStreamSummary": {source}, "kinesis:ListShards": {source},
			"kinesis:GetShardIterator": {source}, "kinesis:GetRecords": {source},
			"kinesis:PutRecord": sorted(writes...), "kinesis:PutRecords": sorted(writes...),
			"sqs:SendMessage":    sorted(sends...),
			"sqs:ReceiveMessage": delay, "sqs:DeleteMessage": delay, "sqs:GetQueueAttributes": delay,
		}
		if reading(p) == fanOut {
			// The event source on the consumer the stack registers.
			consumer := []string{"${" + fanOutConsumerID + ".ConsumerARN}"}
			fn["kinesis:DescribeStreamConsumer"], fn["kinesis:SubscribeToShard"] = consumer, consumer
		}
		return withIdempotencyGrants(p, map[string]map[string][]string{"FunctionRole": fn})
	}
	table := []string{"${LeaseTable.Arn}"}
	logs := []string{"${TaskLogGroup.Arn}"}
	exec := map[string][]string{"logs:CreateLogStream": logs, "logs:PutLogEvents": logs}
	if repo := p["ImageRepository"]; repo != "" {
		arn := []string{"arn:${AWS::Partition}:ecr:${AWS::Region}:${AWS::AccountId}:repository/" + repo}
		exec["ecr:BatchGetImage"], exec["ecr:GetDownloadUrlForLayer"], exec["ecr:GetAuthorizationToken"] = arn, arn, []string{"*"}
	}
	// AdditionalStreamArns: the same reads as the first stream's, and
	// copies back to each (PutRecords; PutRecord is for replies only).
	streams := append([]string{source}, additionalStreams(p)...)
	task := map[string][]string{
		"kinesis:ListShards": sorted(streams...), "kinesis:GetShardIterator": sorted(streams...),
		"kinesis:PutRecord": sorted(writes...), "kinesis:PutRecords": sorted(slices.Concat(writes, additionalStreams(p))...),
		"dynamodb:DescribeTable": table, "dynamodb:GetItem": table, "dynamodb:PutItem": table,
		"dynamodb:UpdateItem": table, "dynamodb:DeleteItem": table, "dynamodb:Scan": table,
		"dynamodb:Query":  {"${LeaseTable.Arn}/index/leaseOwner-index"},
		"sqs:SendMessage": sorted(sends...), "sqs:ReceiveMessage": delay, "sqs:DeleteMessage": delay,
	}
	if reading(p) == fanOut {
		// consumer/efo.go: RegisterStreamConsumer names the stream;
		// DescribeStreamConsumer and SubscribeToShard the consumer, whose
		// ARN ends in its creation time.
		// AdditionalStreamArns: any consumer of each (the wider grant the
		// template explains).
		consumers := []string{source + "/consumer/" + p["FanOutConsumerName"] + ":*"}
		for _, arn := range additionalStreams(p) {
			consumers = append(consumers, arn+"/consumer/*")
		}
		consumers = sorted(consumers...)
		task["kinesis:RegisterStreamConsumer"] = sorted(streams...)
		task["kinesis:DescribeStreamConsumer"], task["kinesis:SubscribeToShard"] = consumers, consumers
	} else {
		task["kinesis:GetRecords"] = sorted(streams...)
	}
	return withIdempotencyGrants(p, map[string]map[string][]string{"TaskRole": task, "TaskExecutionRole": exec})
}

// TestAllowListMatchesTheCode checks each row of adapterCalls against the
// file it names: the call is there.
func TestAllowListMatchesTheCode(t *testing.T) {
	for _, c := range adapterCalls {
		src, err := os.ReadFile(filepath.Join("..", c.file))
		if err != nil {
			t.Errorf("%s: %v", c.op, err)
			continue
		}
		method := strings.Split(c.op, ".")[1]
		if !regexp.MustCompile(`\.` + method + `\(`).Match(src) {
			t.Errorf("%s: %s does not call %s; update the allow-list", c.op, c.file, method)
		}
	}
}

// TestEveryAdapterCallIsListed finds every AWS operation the library's code
// declares a client method for (a parameter of type *kinesis.XInput,
// *sqs.XInput or *dynamodb.XInput in non-test code) and checks that
// adapterCalls has a row for it: a new call must be granted, or its absence
// explained, in the template.
func TestEveryAdapterCallIsListed(t *testing.T) {
	services := map[string]string{
		"github.com/aws/aws-sdk-go-v2/service/kinesis":  "kinesis",
		"github.com/aws/aws-sdk-go-v2/service/sqs":      "sqs",
		"github.com/aws/aws-sdk-go-v2/service/dynamodb": "dynamodb",
	}
	// Not the library: test kits, tests, other modules, tools.
	skip := map[string]bool{"deploy": true, "bench": true, "integration": true, "lambdaadaptertest": true,
		"standins": true, "node_modules": true, "testdata": true, "tools": true, "scripts": true}
	found := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != ".." && (skip[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		alias := map[string]string{}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			svc, ok := services[p]
			if !ok {
				continue
			}
			name := svc
			if imp.Name != nil {
				name = imp.Name.Name
			}
			alias[name] = svc
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ft, ok := n.(*ast.FuncType)
			if !ok || ft.Params == nil {
				return true
			}
			for _, p := range ft.Params.List {
				star, ok := p.Type.(*ast.StarExpr)
				if !ok {
					continue
				}
				sel, ok := star.X.(*ast.SelectorExpr)
				if !ok {
					continue
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok || alias[pkg.Name] == "" || !strings.HasSuffix(sel.Sel.Name, "Input") {
					continue
				}
				op := alias[pkg.Name] + "." + strings.TrimSuffix(sel.Sel.Name, "Input")
				rel, _ := filepath.Rel("..", path)
				found[op] = append(found[op], rel)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 5 {
		t.Fatalf("found only %d operations; is the scan broken? %v", len(found), found)
	}
	listed := map[string]bool{}
	for _, c := range adapterCalls {
		listed[c.op] = true
	}
	for _, op := range slices.Sorted(maps.Keys(found)) {
		if !listed[op] {
			t.Errorf("the code calls %s (%s): add it to adapterCalls with the IAM action and the modes, grant it in template.yaml or say why not",
				op, strings.Join(slices.Compact(found[op]), ", "))
		}
	}
	for _, c := range adapterCalls {
		if _, ok := found[c.op]; !ok {
			t.Errorf("adapterCalls lists %s, which the code no longer declares", c.op)
		}
	}
}
