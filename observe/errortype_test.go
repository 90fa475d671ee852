package observe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/observe"
)

func TestErrorType(t *testing.T) {
	throttled := &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Message: "slow down"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"other", errors.New("boom"), ""},
		{"AWS code", fmt.Errorf("put: %w", throttled), "ProvisionedThroughputExceededException"},
		{"AWS code without one", &smithy.GenericAPIError{Message: "no code"}, ""},
		{"entry code", fmt.Errorf("put: %w", &publish.EntryError{Code: "InternalFailure", Message: "x"}), "InternalFailure"},
		{"entry without code", &publish.EntryError{Message: "x"}, ""},
		{"throttled before timeout", errors.Join(publish.ErrThrottled, context.DeadlineExceeded), "throttled"},
		{"stream", fmt.Errorf("put: %w", publish.ErrStreamNotFound), "stream_not_found"},
		{"too large", publish.ErrTooLarge, "too_large"},
		{"invalid record", publish.ErrInvalidRecord, "invalid_record"},
		{"queue", publish.ErrQueueNotFound, "queue_not_found"},
		{"message too large", publish.ErrMessageTooLarge, "message_too_large"},
		{"invalid message", publish.ErrInvalidMessage, "invalid_message"},
		{"lease lost", fmt.Errorf("checkpoint: %w", lease.ErrLeaseLost), "lease_lost"},
		{"lease not found", lease.ErrNotFound, "lease_not_found"},
		{"lease table", lease.ErrTableNotFound, "lease_table_not_found"},
		{"timeout", context.DeadlineExceeded, "timeout"},
		{"canceled", context.Canceled, "canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := observe.ErrorType(tt.err); got != tt.want {
				t.Errorf("ErrorType(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
