package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/lambda"
	"github.com/awslabs/goformation/v7/intrinsics"
	"gopkg.in/yaml.v3"
)

// Template is a CloudFormation template as goformation parses it: the YAML
// short forms (!Ref, !If, ...) turned into their long forms, nothing
// evaluated. A Template is not changed by Evaluate; it is safe for
// concurrent use.
type Template struct {
	// Raw is the whole template as JSON values (maps, slices, strings,
	// float64, bool).
	Raw map[string]any
	// Parameters are goformation's typed view of the Parameters section.
	Parameters cloudformation.Parameters
	// Transform is the template's Transform (AWS::Serverless-2016-10-31 for
	// a SAM template).
	Transform *cloudformation.Transform
}

// shortForms are the YAML tags goformation turns into intrinsic functions. A
// template must use the long form of any other (Fn::Contains, Condition):
// goformation would read such a tagged value as a plain string.
var shortForms = []string{
	"!Ref", "!GetAtt", "!Base64", "!FindInMap", "!GetAZs", "!ImportValue", "!Join", "!Select",
	"!Split", "!Sub", "!Equals", "!Cidr", "!And", "!If", "!Not", "!Or",
}

// Load reads and parses the template at path.
func Load(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse parses a YAML (or JSON) template.
func Parse(data []byte) (*Template, error) {
	if err := checkShortForms(data); err != nil {
		return nil, err
	}
	js, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	t := &Template{}
	if err := json.Unmarshal(js, &t.Raw); err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	var head struct {
		Transform  *cloudformation.Transform
		Parameters cloudformation.Parameters
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, fmt.Errorf("deploy: parameters: %w", err)
	}
	t.Transform, t.Parameters = head.Transform, head.Parameters
	return t, nil
}

// checkShortForms reports a YAML tag that goformation does not turn into an
// intrinsic function.
func checkShortForms(data []byte) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("deploy: invalid YAML: %w", err)
	}
	var bad []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") && !slices.Contains(shortForms, n.Tag) {
			bad = append(bad, fmt.Sprintf("line %d: %s", n.Line, n.Tag))
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	if len(bad) > 0 {
		return fmt.Errorf("deploy: short forms goformation does not know (write the long form, e.g. {Condition: X}, {\"Fn::Contains\": [...]}): %s", strings.Join(bad, ", "))
	}
	return nil
}

// Stack is a Template evaluated for one set of parameter values: what
// CloudFormation would create.
type Stack struct {
	// Params holds each parameter's value: a string, or a []string for a
	// list type.
	Params map[string]any
	// Conditions holds every condition's value.
	Conditions map[string]bool
	// Resources holds the resources created, evaluated.
	Resources map[string]*Resource
	// Outputs holds the value of each output created.
	Outputs map[string]any
}

// Resource is one evaluated resource.
type Resource struct {
	Type       string
	Properties map[string]any
	Metadata   map[string]any
	DependsOn  []string
}

// RuleError reports the Rules assertions a set of parameter values fails, as
// CloudFormation does before it creates anything.
type RuleError struct {
	Failed []string // "Rule: AssertDescription"
}

func (e *RuleError) Error() string {
	return "deploy: rules failed: " + strings.Join(e.Failed, "; ")
}

// noValue is what Ref AWS::NoValue evaluates to: the enclosing property or
// list element is left out.
type noValueType struct{}

var noValue = noValueType{}

// evaluator holds the state of one Evaluate.
type evaluator struct {
	t          *Template
	params     map[string]any
	conds      map[string]any // raw expressions
	condValue  map[string]bool
	condBusy   map[string]bool
	resources  map[string]any // raw
	present    map[string]bool
	parameters map[string]any // raw Parameters section
}

// Evaluate evaluates the template with the given parameter values (the
// others take their defaults), as CloudFormation would: an unknown
// parameter, a value its constraints refuse, a failed rule, an unsupported
// intrinsic function or a reference to a resource that is not created is an
// error.
func (t *Template) Evaluate(overrides map[string]string) (*Stack, error) {
	e := &evaluator{
		t:         t,
		params:    map[string]any{},
		condValue: map[string]bool{},
		condBusy:  map[string]bool{},
		present:   map[string]bool{},
	}
	e.parameters, _ = t.Raw["Parameters"].(map[string]any)
	e.conds, _ = t.Raw["Conditions"].(map[string]any)
	e.resources, _ = t.Raw["Resources"].(map[string]any)
	if err := e.setParams(overrides); err != nil {
		return nil, err
	}
	if err := e.rules(); err != nil {
		return nil, err
	}
	s := &Stack{Params: e.params, Conditions: map[string]bool{}, Resources: map[string]*Resource{}, Outputs: map[string]any{}}
	for _, name := range slices.Sorted(maps.Keys(e.conds)) {
		v, err := e.condition(name)
		if err != nil {
			return nil, err
		}
		s.Conditions[name] = v
	}
	for name, raw := range e.resources {
		r, _ := raw.(map[string]any)
		if r == nil {
			return nil, fmt.Errorf("deploy: resource %s is not a map", name)
		}
		on := true
		if c, ok := r["Condition"]; ok {
			cn, _ := c.(string)
			v, err := e.condition(cn)
			if err != nil {
				return nil, fmt.Errorf("deploy: resource %s: %w", name, err)
			}
			on = v
		}
		e.present[name] = on
	}
	for _, name := range slices.Sorted(maps.Keys(e.resources)) {
		if !e.present[name] {
			continue
		}
		r := e.resources[name].(map[string]any)
		res := &Resource{}
		res.Type, _ = r["Type"].(string)
		if res.Type == "" {
			return nil, fmt.Errorf("deploy: resource %s has no Type", name)
		}
		for key, val := range r {
			switch key {
			case "Type", "Condition", "DeletionPolicy", "UpdateReplacePolicy":
			case "Properties":
				v, err := e.value(val, name+".Properties")
				if err != nil {
					return nil, err
				}
				res.Properties, _ = v.(map[string]any)
			case "Metadata":
				v, err := e.value(val, name+".Metadata")
				if err != nil {
					return nil, err
				}
				res.Metadata, _ = v.(map[string]any)
			case "DependsOn":
				deps, err := stringList(val)
				if err != nil {
					return nil, fmt.Errorf("deploy: resource %s: DependsOn: %w", name, err)
				}
				for _, d := range deps {
					if !e.present[d] {
						return nil, fmt.Errorf("deploy: resource %s depends on %s, which is not created", name, d)
					}
				}
				res.DependsOn = deps
			default:
				return nil, fmt.Errorf("deploy: resource %s: unknown attribute %s", name, key)
			}
		}
		if res.Properties == nil {
			res.Properties = map[string]any{}
		}
		s.Resources[name] = res
	}
	outputs, _ := t.Raw["Outputs"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(outputs)) {
		o, _ := outputs[name].(map[string]any)
		if c, ok := o["Condition"]; ok {
			cn, _ := c.(string)
			on, err := e.condition(cn)
			if err != nil {
				return nil, fmt.Errorf("deploy: output %s: %w", name, err)
			}
			if !on {
				continue
			}
		}
		v, err := e.value(o["Value"], "Outputs."+name)
		if err != nil {
			return nil, err
		}
		s.Outputs[name] = v
	}
	return s, nil
}

// setParams gives every parameter its value and checks it.
func (e *evaluator) setParams(overrides map[string]string) error {
	for name := range overrides {
		if _, ok := e.parameters[name]; !ok {
			return fmt.Errorf("deploy: no parameter %s", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.parameters)) {
		p := e.t.Parameters[name]
		v, ok := overrides[name]
		if !ok {
			if p.Default == nil {
				return fmt.Errorf("deploy: parameter %s has no default and no value", name)
			}
			v = scalarString(p.Default)
		}
		if !isList(p.Type) {
			if err := checkParam(name, p, v); err != nil {
				return err
			}
			e.params[name] = v
			continue
		}
		// A list: CloudFormation splits the value at its commas, trims
		// the spaces around each element and checks each element against
		// the AllowedPattern (and AllowedValues).
		l := strings.Split(v, ",")
		for i, el := range l {
			l[i] = strings.TrimSpace(el)
			if err := checkParam(name, p, l[i]); err != nil {
				return err
			}
		}
		e.params[name] = l
	}
	return nil
}

// isList reports whether a parameter of type typ is a list
// (CommaDelimitedList, List<...>).
func isList(typ string) bool {
	return typ == "CommaDelimitedList" || strings.HasPrefix(typ, "List<")
}

// checkParam checks v, the value of parameter p or, for a list, one of its
// elements, against p's constraints.
func checkParam(name string, p cloudformation.Parameter, v string) error {
	bad := func(why string) error { return fmt.Errorf("deploy: parameter %s=%q: %s", name, v, why) }
	if len(p.AllowedValues) > 0 && !slices.ContainsFunc(p.AllowedValues, func(a any) bool { return scalarString(a) == v }) {
		return bad("not one of the AllowedValues")
	}
	if p.AllowedPattern != nil {
		re, err := regexp.Compile("^(?:" + *p.AllowedPattern + ")$")
		if err != nil {
			return bad("AllowedPattern: " + err.Error())
		}
		if !re.MatchString(v) {
			return bad("does not match AllowedPattern")
		}
	}
	if p.MinLength != nil && len(v) < *p.MinLength || p.MaxLength != nil && len(v) > *p.MaxLength {
		return bad("length out of bounds")
	}
	if p.Type == "Number" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return bad("not a number")
		}
		if p.MinValue != nil && f < *p.MinValue || p.MaxValue != nil && f > *p.MaxValue {
			return bad("out of MinValue..MaxValue")
		}
	}
	return nil
}

// scalarString renders a YAML scalar as CloudFormation sees it.
func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// rules runs the Rules section.
func (e *evaluator) rules() error {
	rules, _ := e.t.Raw["Rules"].(map[string]any)
	var failed []string
	for _, name := range slices.Sorted(maps.Keys(rules)) {
		r, _ := rules[name].(map[string]any)
		if c, ok := r["RuleCondition"]; ok {
			on, err := e.boolean(c, "Rules."+name)
			if err != nil {
				return err
			}
			if !on {
				continue
			}
		}
		as, _ := r["Assertions"].([]any)
		for _, a := range as {
			am, _ := a.(map[string]any)
			ok, err := e.boolean(am["Assert"], "Rules."+name)
			if err != nil {
				return err
			}
			if !ok {
				failed = append(failed, fmt.Sprintf("%s: %v", name, am["AssertDescription"]))
			}
		}
	}
	if len(failed) > 0 {
		return &RuleError{Failed: failed}
	}
	return nil
}

// condition returns the value of the named condition.
func (e *evaluator) condition(name string) (bool, error) {
	if v, ok := e.condValue[name]; ok {
		return v, nil
	}
	expr, ok := e.conds[name]
	if !ok {
		return false, fmt.Errorf("deploy: no condition %q", name)
	}
	if e.condBusy[name] {
		return false, fmt.Errorf("deploy: condition %s refers to itself", name)
	}
	e.condBusy[name] = true
	v, err := e.boolean(expr, "Conditions."+name)
	delete(e.condBusy, name)
	if err != nil {
		return false, err
	}
	e.condValue[name] = v
	return v, nil
}

// boolean evaluates a condition (or rule) function.
func (e *evaluator) boolean(expr any, at string) (bool, error) {
	m, ok := expr.(map[string]any)
	if !ok || len(m) != 1 {
		return false, fmt.Errorf("deploy: %s: not a condition function: %v", at, expr)
	}
	for fn, arg := range m {
		args, _ := arg.([]any)
		switch fn {
		case "Condition":
			name, _ := arg.(string)
			return e.condition(name)
		case "Fn::Equals":
			if len(args) != 2 {
				return false, fmt.Errorf("deploy: %s: Fn::Equals takes two values", at)
			}
			a, err := e.value(args[0], at)
			if err != nil {
				return false, err
			}
			b, err := e.value(args[1], at)
			if err != nil {
				return false, err
			}
			return scalarString(a) == scalarString(b), nil
		case "Fn::Not":
			if len(args) != 1 {
				return false, fmt.Errorf("deploy: %s: Fn::Not takes one condition", at)
			}
			v, err := e.boolean(args[0], at)
			return !v, err
		case "Fn::And", "Fn::Or":
			if len(args) < 2 || len(args) > 10 {
				return false, fmt.Errorf("deploy: %s: %s takes 2 to 10 conditions", at, fn)
			}
			for _, a := range args {
				v, err := e.boolean(a, at)
				if err != nil {
					return false, err
				}
				if fn == "Fn::And" && !v {
					return false, nil
				}
				if fn == "Fn::Or" && v {
					return true, nil
				}
			}
			return fn == "Fn::And", nil
		case "Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn": // Rules only
			if len(args) != 2 {
				return false, fmt.Errorf("deploy: %s: %s takes two values", at, fn)
			}
			a, err := e.value(args[0], at)
			if err != nil {
				return false, err
			}
			b, err := e.value(args[1], at)
			if err != nil {
				return false, err
			}
			list, err := stringList(a)
			if err != nil {
				return false, fmt.Errorf("deploy: %s: %s: %w", at, fn, err)
			}
			switch fn {
			case "Fn::Contains":
				return slices.Contains(list, scalarString(b)), nil
			case "Fn::EachMemberEquals":
				for _, x := range list {
					if x != scalarString(b) {
						return false, nil
					}
				}
				return true, nil
			default:
				in, err := stringList(b)
				if err != nil {
					return false, fmt.Errorf("deploy: %s: %s: %w", at, fn, err)
				}
				for _, x := range list {
					if !slices.Contains(in, x) {
						return false, nil
					}
				}
				return true, nil
			}
		}
		return false, fmt.Errorf("deploy: %s: %s is not a condition function this evaluator knows", at, fn)
	}
	panic("unreachable")
}

// subVar matches the variables of an Fn::Sub string.
var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// value evaluates a property value.
func (e *evaluator) value(v any, at string) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, 0, len(x))
		for i, el := range x {
			ev, err := e.value(el, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			if ev != noValue {
				out = append(out, ev)
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return e.intrinsic(k, arg, at)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, el := range x {
			ev, err := e.value(el, at+"."+k)
			if err != nil {
				return nil, err
			}
			if ev != noValue {
				out[k] = ev
			}
		}
		return out, nil
	}
	return v, nil
}

// intrinsic evaluates one intrinsic function.
func (e *evaluator) intrinsic(fn string, arg any, at string) (any, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("deploy: %s: %s: %s", at, fn, fmt.Sprintf(format, a...))
	}
	switch fn {
	case "Ref":
		name, ok := arg.(string)
		if !ok {
			return nil, bad("not a name: %v", arg)
		}
		return e.ref(name, at)
	case "Fn::GetAtt":
		var parts []string
		switch a := arg.(type) {
		case string:
			res, attr, ok := strings.Cut(a, ".")
			if !ok {
				return nil, bad("want Resource.Attribute, got %q", a)
			}
			parts = []string{res, attr}
		case []any:
			l, err := stringList(a)
			if err != nil || len(l) != 2 {
				return nil, bad("want [Resource, Attribute], got %v", a)
			}
			parts = l
		default:
			return nil, bad("want [Resource, Attribute], got %v", a)
		}
		if err := e.resourceRef(parts[0], at); err != nil {
			return nil, err
		}
		return "${" + parts[0] + "." + parts[1] + "}", nil
	case "Fn::If":
		args, _ := arg.([]any)
		if len(args) != 3 {
			return nil, bad("takes [condition, then, else]")
		}
		name, _ := args[0].(string)
		on, err := e.condition(name)
		if err != nil {
			return nil, fmt.Errorf("deploy: %s: %w", at, err)
		}
		if on {
			return e.value(args[1], at)
		}
		return e.value(args[2], at)
	case "Fn::Sub":
		var (
			src  string
			vars = map[string]any{}
		)
		switch a := arg.(type) {
		case string:
			src = a
		case []any:
			if len(a) != 2 {
				return nil, bad("takes a string or [string, variables]")
			}
			src, _ = a[0].(string)
			m, _ := a[1].(map[string]any)
			for k, raw := range m {
				v, err := e.value(raw, at+"."+k)
				if err != nil {
					return nil, err
				}
				vars[k] = v
			}
		default:
			return nil, bad("takes a string or [string, variables]")
		}
		var err error
		out := subVar.ReplaceAllStringFunc(src, func(m string) string {
			name := m[2 : len(m)-1]
			if strings.HasPrefix(name, "!") {
				return m // a literal ${...}
			}
			if v, ok := vars[name]; ok {
				if _, isList := v.([]any); isList {
					err = bad("variable %s is a list", name)
				}
				return scalarString(v)
			}
			var v any
			var rerr error
			if res, attr, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "AWS::") {
				if rerr = e.resourceRef(res, at); rerr == nil {
					v = "${" + res + "." + attr + "}"
				}
			} else {
				v, rerr = e.ref(name, at)
			}
			if rerr != nil {
				err = rerr
				return m
			}
			if _, isList := v.([]any); isList {
				err = bad("${%s} is a list", name)
				return m
			}
			return scalarString(v)
		})
		return out, err
	case "Fn::Join":
		args, _ := arg.([]any)
		if len(args) != 2 {
			return nil, bad("takes [separator, list]")
		}
		sep, _ := args[0].(string)
		l, err := e.stringList(args[1], at, bad)
		if err != nil {
			return nil, err
		}
		return strings.Join(l, sep), nil
	case "Fn::Select":
		args, _ := arg.([]any)
		if len(args) != 2 {
			return nil, bad("takes [index, list]")
		}
		iv, err := e.value(args[0], at)
		if err != nil {
			return nil, err
		}
		i, err := strconv.Atoi(scalarString(iv))
		if err != nil {
			return nil, bad("index %v", iv)
		}
		l, err := e.stringList(args[1], at, bad)
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= len(l) {
			return nil, bad("index %d out of %d elements of %q", i, len(l), l)
		}
		return l[i], nil
	case "Fn::Split":
		args, _ := arg.([]any)
		if len(args) != 2 {
			return nil, bad("takes [separator, string]")
		}
		sep, _ := args[0].(string)
		sv, err := e.value(args[1], at)
		if err != nil {
			return nil, err
		}
		s, ok := sv.(string)
		if !ok {
			return nil, bad("not a string: %v", sv)
		}
		parts := strings.Split(s, sep)
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	}
	return nil, bad("not supported by this evaluator (extend deploy/template.go)")
}

// ref evaluates Ref name.
func (e *evaluator) ref(name, at string) (any, error) {
	if name == "AWS::NoValue" {
		return noValue, nil
	}
	if strings.HasPrefix(name, "AWS::") {
		switch name {
		case "AWS::AccountId", "AWS::NotificationARNs", "AWS::Partition", "AWS::Region", "AWS::StackId", "AWS::StackName", "AWS::URLSuffix":
			return "${" + name + "}", nil
		}
		return nil, fmt.Errorf("deploy: %s: no pseudo parameter %s", at, name)
	}
	if v, ok := e.params[name]; ok {
		if l, ok := v.([]string); ok {
			out := make([]any, len(l))
			for i, s := range l {
				out[i] = s
			}
			return out, nil
		}
		return v, nil
	}
	if err := e.resourceRef(name, at); err != nil {
		return nil, err
	}
	return "${" + name + "}", nil
}

// resourceRef checks that name is a resource that is created.
func (e *evaluator) resourceRef(name, at string) error {
	if _, ok := e.resources[name]; !ok {
		return fmt.Errorf("deploy: %s: no parameter or resource %s", at, name)
	}
	if !e.present[name] {
		return fmt.Errorf("deploy: %s: refers to %s, which these parameters do not create", at, name)
	}
	return nil
}

// stringList returns v (a list of strings, or one string) as []string.
func stringList(v any) ([]string, error) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case []string:
		return x, nil
	case []any:
		out := make([]string, len(x))
		for i, el := range x {
			s, ok := el.(string)
			if !ok {
				return nil, fmt.Errorf("element %d is not a string: %v", i, el)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("not a list of strings: %v", v)
}

// Decode decodes the evaluated resource name into r, goformation's type for
// it (for example *iam.Role for AWS::IAM::Role): strictly, so a property
// goformation's model does not know is an error; parameter values are
// converted to the property's type as CloudFormation converts them.
func (s *Stack) Decode(name string, r cloudformation.Resource) error {
	res, ok := s.Resources[name]
	if !ok {
		return fmt.Errorf("deploy: no resource %s in this stack", name)
	}
	if res.Type != r.AWSCloudFormationType() {
		return fmt.Errorf("deploy: resource %s is a %s, not a %s", name, res.Type, r.AWSCloudFormationType())
	}
	return decodeResource(res.Type, res.Properties, res.Metadata, r)
}

// decodeResource decodes props into goformation's resource r.
func decodeResource(typ string, props, metadata map[string]any, r cloudformation.Resource) error {
	if err := exactNames(props, reflect.TypeOf(r), "Properties"); err != nil {
		return fmt.Errorf("deploy: %s: %w", typ, err)
	}
	wrapped := map[string]any{"Type": typ, "Properties": coerce(props, reflect.TypeOf(r))}
	if metadata != nil {
		wrapped["Metadata"] = metadata
	}
	b, err := json.Marshal(wrapped)
	if err != nil {
		return err
	}
	// goformation's UnmarshalJSON of a resource refuses unknown fields.
	if err := json.Unmarshal(b, r); err != nil {
		return fmt.Errorf("deploy: %s: %w", typ, err)
	}
	return nil
}

// Event is one event source of a SAM function, as the SAM transform turns
// it into an AWS::Lambda::EventSourceMapping (Kinesis, SQS, DynamoDB, MQ,
// MSK, DocumentDB events).
type Event struct {
	Type    string // Kinesis, SQS, ...
	Mapping *lambda.EventSourceMapping
}

// samEventSource names the property of a SAM event type that becomes the
// mapping's EventSourceArn.
var samEventSource = map[string]string{"Kinesis": "Stream", "DynamoDB": "Stream", "SQS": "Queue"}

// Function decodes the AWS::Serverless::Function name as the SAM transform
// sees it: its CodeUri, its properties as an AWS::Lambda::Function (strictly:
// a property neither SAM nor AWS::Lambda::Function knows is an error), and
// its events as event source mappings. Properties that SAM turns into other
// resources (Policies, AutoPublishAlias, ...) are refused: the template does
// not use them, and the IAM checks rely on an explicit Role.
func (s *Stack) Function(name string) (codeURI string, fn *lambda.Function, events map[string]Event, err error) {
	res, ok := s.Resources[name]
	if !ok {
		return "", nil, nil, fmt.Errorf("deploy: no resource %s in this stack", name)
	}
	if res.Type != "AWS::Serverless::Function" {
		return "", nil, nil, fmt.Errorf("deploy: resource %s is a %s", name, res.Type)
	}
	props := maps.Clone(res.Properties)
	codeURI, _ = props["CodeUri"].(string)
	delete(props, "CodeUri")
	rawEvents, _ := props["Events"].(map[string]any)
	delete(props, "Events")
	fn = &lambda.Function{}
	if err := decodeResource("AWS::Lambda::Function", props, res.Metadata, fn); err != nil {
		return "", nil, nil, fmt.Errorf("deploy: function %s: %w", name, err)
	}
	events = map[string]Event{}
	for en, raw := range rawEvents {
		ev, _ := raw.(map[string]any)
		typ, _ := ev["Type"].(string)
		src, ok := samEventSource[typ]
		if !ok {
			return "", nil, nil, fmt.Errorf("deploy: function %s: event %s: type %q is not one the checks know", name, en, typ)
		}
		for k := range ev {
			if k != "Type" && k != "Properties" {
				return "", nil, nil, fmt.Errorf("deploy: function %s: event %s: unknown key %s", name, en, k)
			}
		}
		p, _ := ev["Properties"].(map[string]any)
		p = maps.Clone(p)
		p["EventSourceArn"] = p[src]
		delete(p, src)
		p["FunctionName"] = "${" + name + "}"
		m := &lambda.EventSourceMapping{}
		if err := decodeResource("AWS::Lambda::EventSourceMapping", p, nil, m); err != nil {
			return "", nil, nil, fmt.Errorf("deploy: function %s: event %s: %w", name, en, err)
		}
		events[en] = Event{Type: typ, Mapping: m}
	}
	return codeURI, fn, events, nil
}

// coerce converts the JSON value v for a Go value of type t as CloudFormation
// converts parameter values: a string where a number or a boolean is
// wanted, a number or boolean where a string is. Anything else is left for
// the decoder to refuse.
func coerce(v any, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		switch x := v.(type) {
		case float64, bool:
			return scalarString(x)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Float32, reflect.Float64:
		if s, ok := v.(string); ok {
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				return f
			}
		}
	case reflect.Bool:
		if s, ok := v.(string); ok {
			if b, err := strconv.ParseBool(s); err == nil {
				return b
			}
		}
	case reflect.Slice:
		if l, ok := v.([]any); ok {
			out := make([]any, len(l))
			for i, el := range l {
				out[i] = coerce(el, t.Elem())
			}
			return out
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for k, el := range m {
				out[k] = coerce(el, t.Elem())
			}
			return out
		}
	case reflect.Struct:
		if m, ok := v.(map[string]any); ok {
			fields := map[string]reflect.Type{}
			for f := range t.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "" {
					name = f.Name
				}
				if name != "-" {
					fields[name] = f.Type
				}
			}
			out := make(map[string]any, len(m))
			for k, el := range m {
				if ft, ok := fields[k]; ok {
					out[k] = coerce(el, ft)
				} else {
					out[k] = el
				}
			}
			return out
		}
	}
	return v
}

// exactNames reports a property name that matches a field of t only when
// case is ignored: encoding/json accepts it, CloudFormation does not.
func exactNames(v any, t reflect.Type, at string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		if l, ok := v.([]any); ok {
			for i, el := range l {
				if err := exactNames(el, t.Elem(), fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			for k, el := range m {
				if err := exactNames(el, t.Elem(), at+"."+k); err != nil {
					return err
				}
			}
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) && at != "Properties" {
			return nil // a union type of goformation's decides itself
		}
		fields := map[string]reflect.Type{}
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if name != "-" {
				fields[name] = f.Type
			}
		}
		for k, el := range m {
			ft, ok := fields[k]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, k) {
						return fmt.Errorf("%s.%s: the property is %s", at, k, name)
					}
				}
				continue // the strict decoder reports it
			}
			if err := exactNames(el, ft, at+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// Statement is one IAM policy statement.
type Statement struct {
	Sid         string
	Effect      string
	Action      StringList
	NotAction   StringList
	Resource    StringList
	NotResource StringList
	Principal   any
	Condition   any
}

// StringList is a JSON string or list of strings.
type StringList []string

// UnmarshalJSON accepts a string or a list of strings.
func (l *StringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = StringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a string or a list of strings: %w", err)
	}
	*l = many
	return nil
}

// PolicyStatements decodes an evaluated IAM policy document, refusing keys
// IAM does not know.
func PolicyStatements(doc any) ([]Statement, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var d struct {
		Version   string
		Id        string
		Statement json.RawMessage
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("deploy: policy document: %w", err)
	}
	if len(d.Statement) == 0 {
		return nil, errors.New("deploy: policy document without statements")
	}
	if d.Statement[0] != '[' {
		d.Statement = append(append([]byte{'['}, d.Statement...), ']')
	}
	var st []Statement
	dec = json.NewDecoder(bytes.NewReader(d.Statement))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("deploy: policy statements: %w", err)
	}
	return st, nil
}

// stringList evaluates v at path at and reads it as a list of strings; a
// value that is not one is reported through bad.
func (e *evaluator) stringList(v any, at string, bad func(string, ...any) error) ([]string, error) {
	lv, err := e.value(v, at)
	if err != nil {
		return nil, err
	}
	l, err := stringList(lv)
	if err != nil {
		return nil, bad("%v", err)
	}
	return l, nil
}
