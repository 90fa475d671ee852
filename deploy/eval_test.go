package deploy

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// evalTemplate is a small template exercising what Evaluate supports.
const evalTemplate = `
Parameters:
  Mode: {Type: String, AllowedValues: [a, b], Default: a}
  Arn: {Type: String, Default: "arn:aws:kinesis:eu-west-1:123456789012:stream/orders", AllowedPattern: "arn:.*"}
  Count: {Type: Number, Default: 2, MinValue: 1, MaxValue: 5}
  Subnets: {Type: CommaDelimitedList, Default: "s1,s2"}
Rules:
  CountInB:
    RuleCondition: !Equals [!Ref Mode, b]
    Assertions:
      - Assert: {"Fn::Contains": [[ "3", "4" ], !Ref Count]}
        AssertDescription: b needs Count 3 or 4
Conditions:
  IsA: !Equals [!Ref Mode, a]
  IsB: !Not [{Condition: IsA}]
  AAndTwo: !And [{Condition: IsA}, !Equals [!Ref Count, "2"]]
  HasSubnets: !Not [!Equals [!Join ["", !Ref Subnets], ""]]
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Condition: IsA
  Other:
    Type: AWS::SQS::Queue
    Condition: IsB
  Thing:
    Type: Custom::Thing
    Properties:
      Name: !Select [1, !Split ["/", !Ref Arn]]
      Url: !If [IsA, !Ref Queue, !Ref Other]
      Arn: !GetAtt Queue.Arn
      Sub: !Sub "${AWS::Region}/${Queue.Arn}/${Count}/${!Literal}"
      SubVars: !Sub ["${X}-${Count}", {X: !Ref Mode}]
      Maybe: !If [IsB, yes, !Ref AWS::NoValue]
      List: [one, !If [IsB, two, !Ref AWS::NoValue], !Join [",", !Ref Subnets]]
      Count: !Ref Count
Outputs:
  OnlyB:
    Condition: IsB
    Value: !Ref Other
  Always:
    Value: !GetAtt Queue.Arn
`

func TestEvaluate(t *testing.T) {
	tm, err := Parse([]byte(evalTemplate))
	if err != nil {
		t.Fatal(err)
	}
	s, err := tm.Evaluate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"IsA": true, "IsB": false, "AAndTwo": true, "HasSubnets": true}, s.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if _, ok := s.Resources["Other"]; ok {
		t.Error("Other is created though its condition is false")
	}
	want := map[string]any{
		"Name":    "orders",
		"Url":     "${Queue}",
		"Arn":     "${Queue.Arn}",
		"Sub":     "${AWS::Region}/${Queue.Arn}/2/${!Literal}",
		"SubVars": "a-2",
		"List":    []any{"one", "s1,s2"},
		"Count":   "2",
	}
	if diff := cmp.Diff(want, s.Resources["Thing"].Properties); diff != "" {
		t.Errorf("Thing (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"Always": "${Queue.Arn}"}, s.Outputs); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
}

func TestEvaluateErrors(t *testing.T) {
	tm, err := Parse([]byte(evalTemplate))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"Nope": "x"}, "no parameter Nope"},
		{map[string]string{"Mode": "c"}, "not one of the AllowedValues"},
		{map[string]string{"Count": "9"}, "out of MinValue..MaxValue"},
		{map[string]string{"Arn": "orders"}, "does not match AllowedPattern"},
		// Mode b: Thing's Arn refers to Queue, which b does not create.
		{map[string]string{"Mode": "b", "Count": "3"}, "refers to Queue, which these parameters do not create"},
	} {
		_, err := tm.Evaluate(tc.params)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Evaluate(%v) = %v, want an error containing %q", tc.params, err, tc.want)
		}
	}
	_, err = tm.Evaluate(map[string]string{"Mode": "b"})
	var re *RuleError
	if !errors.As(err, &re) || len(re.Failed) != 1 || !strings.HasPrefix(re.Failed[0], "CountInB:") {
		t.Errorf("Evaluate(Mode=b) = %v, want the rule CountInB to fail", err)
	}
}

func TestParseRefusesUnknownShortForms(t *testing.T) {
	for _, src := range []string{
		"Conditions:\n  A: !And [!Condition B, !Equals [a, a]]\n",
		"Rules:\n  R:\n    Assertions:\n      - Assert: !Contains [[a], a]\n",
	} {
		if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), "short forms goformation does not know") {
			t.Errorf("Parse(%q) = %v, want the short form refused", src, err)
		}
	}
}

func TestPolicyStatements(t *testing.T) {
	st, err := PolicyStatements(map[string]any{
		"Version":   "2012-10-17",
		"Statement": map[string]any{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": []any{"a", "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || !cmp.Equal(st[0].Action, StringList{"sqs:SendMessage"}) || !cmp.Equal(st[0].Resource, StringList{"a", "b"}) {
		t.Errorf("PolicyStatements = %+v", st)
	}
	if _, err := PolicyStatements(map[string]any{"Statement": []any{map[string]any{"Effect": "Allow", "Actions": "x"}}}); err == nil {
		t.Error("a statement with the unknown key Actions was accepted")
	}
}

// listTemplate exercises a list parameter as template.yaml uses
// AdditionalStreamArns: the per-element AllowedPattern, a rule on its
// members, Fn::Join over it, and a suffix given to every element with a
// literal Fn::Join delimiter, Fn::Sub and Fn::Split.
const listTemplate = `
Parameters:
  Arns:
    Type: CommaDelimitedList
    Default: ""
    AllowedPattern: "^(arn:aws:kinesis:[a-z0-9-]+:[0-9]{12}:stream/[a-z]+)?$"
Rules:
  NoEmptyEntry:
    RuleCondition: !Not [{"Fn::EachMemberEquals": [!Ref Arns, ""]}]
    Assertions:
      - Assert: !Not [{"Fn::Contains": [!Ref Arns, ""]}]
        AssertDescription: no empty entry
Conditions:
  HasArns: !Not [!Equals [!Join ["", !Ref Arns], ""]]
Resources:
  Thing:
    Type: Custom::Thing
    Properties:
      Joined: !Join [",", [first, !Join [",", !Ref Arns]]]
      List: !Ref Arns
      Suffixed: !If
        - HasArns
        - !Split [",", !Sub ["${A}/consumer/*", {A: !Join ["/consumer/*,", !Ref Arns]}]]
        - !Ref AWS::NoValue
`

func TestEvaluateListParameters(t *testing.T) {
	tm, err := Parse([]byte(listTemplate))
	if err != nil {
		t.Fatal(err)
	}
	const (
		a = "arn:aws:kinesis:eu-west-1:123456789012:stream/a"
		b = "arn:aws:kinesis:eu-west-1:123456789012:stream/b"
	)
	for _, tc := range []struct {
		name, value string
		want        map[string]any // Thing's properties
		err         string
	}{
		{"default", "", map[string]any{"Joined": "first,", "List": []any{""}}, ""},
		{"one", a, map[string]any{"Joined": "first," + a, "List": []any{a}, "Suffixed": []any{a + "/consumer/*"}}, ""},
		// CloudFormation trims the spaces around each element.
		{"two with spaces", " " + a + " , " + b, map[string]any{
			"Joined": "first," + a + "," + b, "List": []any{a, b}, "Suffixed": []any{a + "/consumer/*", b + "/consumer/*"}}, ""},
		// The pattern applies to each element, not to the whole value.
		{"one element refused", a + ",orders", nil, "does not match AllowedPattern"},
		{"empty entry", a + ",", nil, "NoEmptyEntry: no empty entry"},
		{"only commas", ",", map[string]any{"Joined": "first,,", "List": []any{"", ""}}, ""},
	} {
		p := map[string]string{}
		if tc.value != "" {
			p["Arns"] = tc.value
		}
		s, err := tm.Evaluate(p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: Evaluate(%q) = %v, want an error containing %q", tc.name, tc.value, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Evaluate(%q): %v", tc.name, tc.value, err)
			continue
		}
		if diff := cmp.Diff(tc.want, s.Resources["Thing"].Properties); diff != "" {
			t.Errorf("%s: Thing (-want +got):\n%s", tc.name, diff)
		}
	}
}
