package observe

import (
	"context"
	"errors"

	"github.com/aws/smithy-go"

	"github.com/shardsettle/lambdaadapter/internal/publish"
	"github.com/shardsettle/lambdaadapter/lease"
)

// errorTypes are the adapter's errors a write or checkpoint can match, with
// their ErrorType values, in the order they are tried: a write throttled
// until its deadline matches both ErrThrottled and context.DeadlineExceeded
// and is "throttled".
var errorTypes = []struct {
	err  error
	name string
}{
	{publish.ErrThrottled, "throttled"},
	{publish.ErrStreamNotFound, "stream_not_found"},
	{publish.ErrTooLarge, "too_large"},
	{publish.ErrInvalidRecord, "invalid_record"},
	{publish.ErrQueueNotFound, "queue_not_found"},
	{publish.ErrMessageTooLarge, "message_too_large"},
	{publish.ErrInvalidMessage, "invalid_message"},
	{lease.ErrLeaseLost, "lease_lost"},
	{lease.ErrNotFound, "lease_not_found"},
	{lease.ErrTableNotFound, "lease_table_not_found"},
	{context.DeadlineExceeded, "timeout"},
	{context.Canceled, "canceled"},
}

// ErrorType classifies the error of a failed write (Write.Err) or
// checkpoint (Checkpoint.Err) for a metric or span attribute: the AWS error
// code when the error carries one ("ProvisionedThroughputExceededException",
// also the code of a failed batch entry), else the name of the adapter's
// error it matches: "throttled", "stream_not_found", "too_large",
// "invalid_record", "queue_not_found", "message_too_large",
// "invalid_message", "lease_lost", "lease_not_found",
// "lease_table_not_found", "timeout" or "canceled". It returns "" for nil
// and for any other error; an exporter names that case its own way. The
// values are few, so metrics labelled with them stay cheap. It is safe for
// concurrent use.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() != "" {
		return api.ErrorCode()
	}
	var entry *publish.EntryError
	if errors.As(err, &entry) && entry.Code != "" {
		return entry.Code
	}
	for _, t := range errorTypes {
		if errors.Is(err, t.err) {
			return t.name
		}
	}
	return ""
}
