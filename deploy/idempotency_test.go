package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	"github.com/google/go-cmp/cmp"
)

// The template's optional idempotency table (parameter Idempotency: "" off,
// "create", or an existing table's name) and what goes with it: the table,
// the grants of the role the adapter runs with, LAMBDAADAPTER_IDEMPOTENCY_TABLE
// in both modes (read by cmd/bootstrap, which wraps its handler in package
// idempotency), and an output.

// Sources of the idempotency helper, relative to this package.
const (
	idempotencyStore  = "../idempotency/dynamodb.go"
	idempotencyTables = "../idempotency/table.go"
	// bootstrapIdempotency is where cmd/bootstrap reads the helper's
	// variables.
	bootstrapIdempotency = "../cmd/bootstrap/idempotency.go"
)

// existingIdempotencyTable is the Idempotency value of the cases that
// name an existing table.
const existingIdempotencyTable = "shared-idempotency"

// idempotencyCalls are the allow-list rows of package idempotency (see
// adapterCalls): the item calls in both modes, on the helper's table only;
// the table calls belong to `bootstrap idempotency init`.
var idempotencyCalls = []adapterCall{
	{"dynamodb.PutItem", "dynamodb:PutItem", bothModes, "idempotency/dynamodb.go", "idempotency: the conditional claim", ""},
	{"dynamodb.UpdateItem", "dynamodb:UpdateItem", bothModes, "idempotency/dynamodb.go", "idempotency: completing a claim (conditional)", ""},
	{"dynamodb.DeleteItem", "dynamodb:DeleteItem", bothModes, "idempotency/dynamodb.go", "idempotency: releasing the claim of a failed run (conditional)", ""},
	{"dynamodb.GetItem", "dynamodb:GetItem", bothModes, "idempotency/dynamodb.go",
		"idempotency: reading the item that refused a claim when the service did not return it", ""},
	{"dynamodb.CreateTable", "dynamodb:CreateTable", nil, "idempotency/table.go", "bootstrap idempotency init",
		"the stack creates the idempotency table (or is given one); bootstrap idempotency init is an operator's command"},
	{"dynamodb.DescribeTable", "dynamodb:DescribeTable", nil, "idempotency/table.go", "bootstrap idempotency init (Check)",
		"only bootstrap idempotency init checks the table"},
	{"dynamodb.DescribeTimeToLive", "dynamodb:DescribeTimeToLive", nil, "idempotency/table.go", "bootstrap idempotency init",
		"the stack enables time to live on the table it creates"},
	{"dynamodb.UpdateTimeToLive", "dynamodb:UpdateTimeToLive", nil, "idempotency/table.go", "bootstrap idempotency init",
		"the stack enables time to live on the table it creates"},
}

func init() {
	adapterCalls = append(adapterCalls, idempotencyCalls...)
	wiring = append(wiring, struct {
		param, value string
		variable     string
		want         string
		modes        []string
	}{"Idempotency", "create", "LAMBDAADAPTER_IDEMPOTENCY_TABLE", "${IdempotencyTable}", []string{"lambda", "ecs"}})
}

// idempotencyCombinations are the cases of combinations() with the
// idempotency table: created or existing, in both modes, with and without
// the optional streams.
func idempotencyCombinations() []combination {
	var out []combination
	for _, mode := range []string{"lambda", "ecs"} {
		for _, value := range []string{"create", existingIdempotencyTable} {
			for _, extra := range [][]string{nil, {"StreamArn", existingStreamARN, "CreateReplyStream", "true", "DeadLetterTarget", "queue"}} {
				base := lambdaMode()
				if mode == "ecs" {
					base = ecsMode()
				}
				// Every choice of combinations() explicit, as the checks
				// read them from the parameters.
				kv := []string{"Idempotency", value, "DeadLetterTarget", "stream", "CreateReplyStream", "false", "StreamArn", "",
					"Architecture", "arm64", "MaxAttempts", "3"}
				p := params(base, append(kv, extra...)...)
				if mode == "ecs" {
					p["ImageRepository"], p["SecurityGroups"] = "", ""
				}
				out = append(out, combination{name: describe(p), params: p})
			}
		}
	}
	return out
}

// idempotencyTableARN is the table's ARN as the evaluated stack names it
// with parameters p, or "" without the helper.
func idempotencyTableARN(p map[string]string) string {
	switch v := p["Idempotency"]; v {
	case "":
		return ""
	case "create":
		return "${IdempotencyTable.Arn}"
	default:
		return "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/" + v
	}
}

// withIdempotencyGrants adds to g, wantGrants' result for parameters p, the
// item calls on the idempotency table for the role the adapter runs with.
func withIdempotencyGrants(p map[string]string, g map[string]map[string][]string) map[string]map[string][]string {
	arn := idempotencyTableARN(p)
	if arn == "" {
		return g
	}
	role := "FunctionRole"
	if p["Mode"] == "ecs" {
		role = "TaskRole"
	}
	for _, c := range idempotencyCalls {
		if c.notGranted != "" {
			continue
		}
		rs := append(slices.Clone(g[role][c.action]), arn)
		slices.Sort(rs)
		g[role][c.action] = slices.Compact(rs)
	}
	return g
}

// bootstrapVariables returns the LAMBDAADAPTER_* variables cmd/bootstrap
// reads itself (the idempotency helper's), all of both modes.
func bootstrapVariables(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile(bootstrapIdempotency)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`"(LAMBDAADAPTER_IDEMPOTENCY_[A-Z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		out[m[1]] = "both"
	}
	if _, ok := out["LAMBDAADAPTER_IDEMPOTENCY_TABLE"]; !ok {
		t.Fatalf("%s no longer reads LAMBDAADAPTER_IDEMPOTENCY_TABLE; update this test and the template", bootstrapIdempotency)
	}
	return out
}

// TestIdempotencyTable checks the table the stack creates against the one
// `bootstrap idempotency init` creates (idempotency.CreateTable): on-demand,
// the hash key id of type S only, time to live on expiration.
func TestIdempotencyTable(t *testing.T) {
	src, err := os.ReadFile(idempotencyTables)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"types.BillingModePayPerRequest", "AttributeName: aws.String(attrID), AttributeType: types.ScalarAttributeTypeS",
		"AttributeName: aws.String(attrID), KeyType: types.KeyTypeHash", "AttributeName: aws.String(attrExpiration), Enabled: aws.Bool(true)"} {
		if !strings.Contains(string(src), want) {
			t.Fatalf("%s no longer contains %q: check the idempotency table of template.yaml against CreateTable and update this test", idempotencyTables, want)
		}
	}
	store, err := os.ReadFile(idempotencyStore)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`attrID                   = "id"`, `attrExpiration           = "expiration"`} {
		if !strings.Contains(string(store), want) {
			t.Fatalf("%s no longer contains %q: update the table of template.yaml and this test", idempotencyStore, want)
		}
	}
	for _, mode := range []map[string]string{lambdaMode("Idempotency", "create"), ecsMode("Idempotency", "create")} {
		s := evaluate(t, mode)
		tbl := &dynamodb.Table{}
		if err := s.Decode("IdempotencyTable", tbl); err != nil {
			t.Fatal(err)
		}
		if deref(tbl.BillingMode) != "PAY_PER_REQUEST" {
			t.Errorf("BillingMode %q, want PAY_PER_REQUEST", deref(tbl.BillingMode))
		}
		if len(tbl.KeySchema) != 1 || tbl.KeySchema[0].AttributeName != "id" || tbl.KeySchema[0].KeyType != "HASH" {
			t.Errorf("KeySchema %+v, want only the hash key id", tbl.KeySchema)
		}
		if len(tbl.AttributeDefinitions) != 1 || tbl.AttributeDefinitions[0].AttributeName != "id" || tbl.AttributeDefinitions[0].AttributeType != "S" {
			t.Errorf("AttributeDefinitions %+v, want id of type S", tbl.AttributeDefinitions)
		}
		if ttl := tbl.TimeToLiveSpecification; ttl == nil || deref(ttl.AttributeName) != "expiration" || !ttl.Enabled {
			t.Errorf("TimeToLiveSpecification %+v, want enabled on expiration", ttl)
		}
	}
}

// TestIdempotencyParameter checks each value of the parameter in both
// modes: the table, the variable, the output and the role's grant on the
// table (the item calls the helper makes, on that table only).
func TestIdempotencyParameter(t *testing.T) {
	for _, tc := range []struct {
		value, table, variable string
	}{
		{"", "", ""},
		{"create", "IdempotencyTable", "${IdempotencyTable}"},
		{existingIdempotencyTable, "", existingIdempotencyTable},
	} {
		for _, base := range []map[string]string{lambdaMode(), ecsMode()} {
			p := params(base, "Idempotency", tc.value)
			name := p["Mode"]
			if name == "" {
				name = "lambda"
			}
			name += " mode, Idempotency=" + tc.value
			s := evaluate(t, p)
			_, created := s.Resources["IdempotencyTable"]
			if created != (tc.table != "") {
				t.Errorf("%s: table created: %v", name, created)
			}
			got, set := modeEnv(t, s)["LAMBDAADAPTER_IDEMPOTENCY_TABLE"]
			if got != tc.variable || set != (tc.variable != "") {
				t.Errorf("%s: LAMBDAADAPTER_IDEMPOTENCY_TABLE = %q (set %v), want %q", name, got, set, tc.variable)
			}
			_, ok := s.Outputs["IdempotencyTableName"]
			if ok != (tc.value != "") {
				t.Errorf("%s: output IdempotencyTableName present: %v", name, ok)
			}
			// The grant: exactly the helper's item calls on the table.
			arn := idempotencyTableARN(p)
			var actions []string
			for role, sts := range policyStatements(t, s) {
				if role == "TaskExecutionRole" {
					continue
				}
				for _, st := range sts {
					if slices.Contains(st.Resource, arn) {
						if len(st.Resource) != 1 {
							t.Errorf("%s: statement %s names the idempotency table with other resources %q", name, st.Sid, st.Resource)
						}
						actions = append(actions, st.Action...)
					}
				}
			}
			var want []string
			if arn != "" {
				for _, c := range idempotencyCalls {
					if c.notGranted == "" {
						want = append(want, c.action)
					}
				}
			}
			slices.Sort(actions)
			slices.Sort(want)
			if diff := cmp.Diff(want, actions); diff != "" {
				t.Errorf("%s: actions on the idempotency table (-want +got):\n%s", name, diff)
			}
		}
	}
}

// TestIdempotencyParameterValues checks the parameter's constraint: a
// table name or create, nothing else.
func TestIdempotencyParameterValues(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "create": true, "orders-idempotency": true, "a.b_c-1": true,
		"ab": false, "has space": false, "arn:aws:dynamodb:us-east-1:123456789012:table/x": false, strings.Repeat("t", 256): false} {
		_, err := template(t).Evaluate(lambdaMode("Idempotency", v))
		if (err == nil) != ok {
			t.Errorf("Idempotency=%q: err = %v, want accepted %v", v, err, ok)
		}
	}
}
