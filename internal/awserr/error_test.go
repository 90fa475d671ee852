package awserr

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var (
	errLost    = errors.New("pkg: lease lost")
	errMissing = errors.New("pkg: table not found")
	errStore   = errors.New("pkg: store failed")
)

var testErrs = Sentinels{ConditionFailed: errLost, NotFound: errMissing}

func TestError(t *testing.T) {
	missing := sdk("DynamoDB", "DescribeTable", 400, &dtypes.ResourceNotFoundException{Message: aws.String("Requested resource not found")})
	tests := []struct {
		name    string
		err     *Error
		want    string
		is, not []error
	}{
		{
			"kind's sentinel printed, cause and hint",
			&Error{Pkg: "pkg", Op: "check table", Resource: "leases", Kind: NotFound, Cause: missing, Hint: "create it", Sentinels: &testErrs},
			`pkg: check table "leases": table not found: operation error DynamoDB: DescribeTable, https response error StatusCode: 400, RequestID: req-1, ResourceNotFoundException: Requested resource not found; create it`,
			[]error{errMissing, missing}, []error{errLost, errStore},
		},
		{
			"what instead of the sentinel's text",
			&Error{Pkg: "pkg", Op: "take", Resource: "s:shard-1", Kind: ConditionFailed, What: "lost it", Sentinels: &testErrs},
			`pkg: take "s:shard-1": lost it`,
			[]error{errLost}, []error{errMissing},
		},
		{
			"kind without a sentinel",
			&Error{Pkg: "pkg", Op: "renew", Resource: "s:shard-1", Kind: Throttled, Cause: errors.New("slow down"), Sentinels: &testErrs},
			`pkg: renew "s:shard-1": slow down`,
			nil, []error{errLost, errMissing},
		},
		{
			"also",
			&Error{Pkg: "pkg", Op: "claim", Resource: "id-1", Kind: Canceled, Cause: context.Canceled, Also: errStore},
			`pkg: claim "id-1": context canceled`,
			[]error{errStore, context.Canceled}, []error{errLost},
		},
		{
			"nothing but the operation",
			&Error{Pkg: "pkg", Op: "get", Resource: `a "quoted" key`},
			`pkg: get "a \"quoted\" key"`,
			nil, []error{errLost, errMissing, errStore},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() =\n%s\nwant\n%s", got, tt.want)
			}
			for _, target := range tt.is {
				if !errors.Is(tt.err, target) {
					t.Errorf("does not match %v", target)
				}
			}
			for _, target := range tt.not {
				if errors.Is(tt.err, target) {
					t.Errorf("matches %v", target)
				}
			}
		})
	}
}

func TestErrorAs(t *testing.T) {
	ccf := &dtypes.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	var err error = &Error{Pkg: "pkg", Op: "take", Resource: "k", Kind: ConditionFailed, Cause: sdk("DynamoDB", "UpdateItem", 400, ccf), Sentinels: &testErrs}
	var got *dtypes.ConditionalCheckFailedException
	if !errors.As(err, &got) || got != ccf {
		t.Errorf("errors.As found %v, want the SDK's exception", got)
	}
	var e *Error
	if !errors.As(err, &e) || e.Kind != ConditionFailed {
		t.Errorf("errors.As found %v, want the Error", e)
	}
	if k := Classify(err); k != ConditionFailed {
		t.Errorf("Classify of the Error = %v, want its cause's kind", k)
	}
}
