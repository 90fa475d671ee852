package batchresponse_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/shardsettle/lambdaadapter/internal/batchresponse"
	"github.com/shardsettle/lambdaadapter/internal/settle"
)

func TestAppendJSON(t *testing.T) {
	tests := []struct {
		ids  []string
		want string
	}{
		{nil, `{"batchItemFailures":[]}`},
		{[]string{}, `{"batchItemFailures":[]}`},
		{[]string{"49590338271490256608559692538361571095921575989136588898"}, `{"batchItemFailures":[{"itemIdentifier":"49590338271490256608559692538361571095921575989136588898"}]}`},
		{[]string{"9", "10"}, `{"batchItemFailures":[{"itemIdentifier":"9"},{"itemIdentifier":"10"}]}`},
		{[]string{"a\"b\\c\n\x01é\xff"}, `{"batchItemFailures":[{"itemIdentifier":"a\"b\\c\n\u0001é\ufffd"}]}`},
	}
	for _, tt := range tests {
		got := string(batchresponse.AppendJSON([]byte("prefix:"), tt.ids))
		if got != "prefix:"+tt.want {
			t.Errorf("AppendJSON(%q) = %s, want %s", tt.ids, got, tt.want)
		}
		// It must read back as the response type Lambda's Go library uses.
		var resp events.KinesisEventResponse
		if err := json.Unmarshal([]byte(tt.want), &resp); err != nil {
			t.Fatalf("%s: %v", tt.want, err)
		}
		if len(resp.BatchItemFailures) != len(tt.ids) {
			t.Errorf("%s decodes to %d failures", tt.want, len(resp.BatchItemFailures))
		}
	}
}

func TestFailures(t *testing.T) {
	a := settle.NewWatermark("shardId-000000000001")
	b := settle.NewWatermark("shardId-000000000000")
	c := settle.NewWatermark("shardId-000000000002")
	ta1, _ := a.Deliver("9", 1)
	a.Deliver("10", 1)
	tb1, _ := b.Deliver("100", 1)
	if _, _, err := a.Settle(ta1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Settle(tb1); err != nil {
		t.Fatal(err)
	}
	tc, _ := c.Deliver("5", 1)
	got := batchresponse.Failures([]*settle.Watermark{a, b, c})
	if diff := cmp.Diff([]string{"10", "5"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	c.Settle(tc)
	a2 := settle.NewWatermark("x")
	if got := batchresponse.Failures([]*settle.Watermark{b, c, a2}); got != nil {
		t.Errorf("all settled: %v", got)
	}
}

func ExampleAppendJSON() {
	w := settle.NewWatermark("shardId-000000000000")
	first, _ := w.Deliver("49590338271490256608559692538361571095921575989136588898", 1)
	w.Deliver("49590338271490256608559692540925702759324208523137515618", 1)
	w.Settle(first)
	fmt.Println(string(batchresponse.AppendJSON(nil, batchresponse.Failures([]*settle.Watermark{w}))))
	// Output:
	// {"batchItemFailures":[{"itemIdentifier":"49590338271490256608559692540925702759324208523137515618"}]}
}
