package retry_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/shardsettle/lambdaadapter/publish"
	"github.com/shardsettle/lambdaadapter/retry"
)

func TestSettingsValidate(t *testing.T) {
	pub, err := publish.NewPublisher(kinesis.New(kinesis.Options{Region: "us-east-1"}))
	if err != nil {
		t.Fatal(err)
	}
	q, err := publish.NewQueue(sqs.New(sqs.Options{Region: "us-east-1"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		s    retry.Settings
		want string // "" for valid
	}{
		{"none", retry.Settings{}, ""},
		{"stream", retry.Settings{Publisher: pub, DeadLetterStream: "dl"}, ""},
		{"queue", retry.Settings{Queue: q, DeadLetterQueue: "u"}, ""},
		{"delay", retry.Settings{Publisher: pub, Queue: q, DelayQueue: "u"}, ""},
		{"both", retry.Settings{Publisher: pub, Queue: q, DeadLetterStream: "dl", DeadLetterQueue: "u"}, "not both"},
		{"stream without publisher", retry.Settings{DeadLetterStream: "dl"}, "needs a Kinesis publisher"},
		{"queue without client", retry.Settings{DeadLetterQueue: "u"}, "needs an SQS client"},
		{"delay without publisher", retry.Settings{Queue: q, DelayQueue: "u"}, "forward delayed records"},
		{"negative attempts", retry.Settings{Policy: retry.Policy{MaxAttempts: -1}}, "max attempts"},
		{"negative delay", retry.Settings{Policy: retry.Policy{MaxInProcessDelay: -time.Second}}, "in-process delay"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
	s := retry.Settings{Publisher: pub, Queue: q, DeadLetterQueue: "u", DelayQueue: "d"}
	s.Complete()
	if !s.Policy.DeadLetter || !s.Policy.DelayQueue {
		t.Errorf("Complete: policy %+v, want DeadLetter and DelayQueue set", s.Policy)
	}
}
