package emf_test

import (
	"context"
	"os"
	"time"

	"github.com/shardsettle/lambdaadapter/observe"
	"github.com/shardsettle/lambdaadapter/observe/emf"
)

// The documents of one Lambda invocation of two records, the first Flush of
// the process: ColdStart, then the invocation's metrics. In a program, pass
// the Exporter to lambdaadapter.WithHooks; the adapter calls its methods.
func Example() {
	e := emf.New(os.Stdout,
		emf.WithNamespace("shop"), emf.WithService("orders"), emf.WithFunctionName("orders-consumer"),
		emf.WithClock(func() time.Time { return time.UnixMilli(1700000000000) }))

	const stream = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
	e.OnRecord(observe.Record{Mode: observe.ModeLambda, Stream: stream, ShardID: "shardId-000000000000",
		SequenceNumber: "4959", Outcome: "ack", Action: observe.ActionSettled,
		Handled: 1250 * time.Microsecond, Age: 3 * time.Second})
	e.OnRecord(observe.Record{Mode: observe.ModeLambda, Stream: stream, ShardID: "shardId-000000000000",
		SequenceNumber: "4960", Outcome: "retry", Action: observe.ActionUnsettled,
		Handled: 40 * time.Millisecond, Age: 2 * time.Second})
	e.OnInvocation(observe.Invocation{Records: 2, Failures: 1, Duration: 45 * time.Millisecond,
		OldestAge: 3050 * time.Millisecond, Stream: stream})
	e.Flush(context.Background())
	// Output:
	// {"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"shop","Dimensions":[["function_name","service"]],"Metrics":[{"Name":"ColdStart","Unit":"Count"}]}]},"function_name":"orders-consumer","service":"orders","ColdStart":1}
	// {"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"shop","Dimensions":[["service","Stream"]],"Metrics":[{"Name":"RecordsHandled","Unit":"Count"},{"Name":"RecordsHandledAck","Unit":"Count"},{"Name":"RecordsHandledRetry","Unit":"Count"},{"Name":"RecordsUnsettled","Unit":"Count"},{"Name":"BatchItemFailures","Unit":"Count"},{"Name":"HandlerDuration","Unit":"Milliseconds"},{"Name":"InvocationDuration","Unit":"Milliseconds"},{"Name":"OldestRecordAge","Unit":"Milliseconds"}]}]},"service":"orders","Stream":"orders","OldestHandledShardId":"shardId-000000000000","OldestHandledSequenceNumber":"4959","RecordsHandled":2,"RecordsHandledAck":1,"RecordsHandledRetry":1,"RecordsUnsettled":1,"BatchItemFailures":1,"HandlerDuration":[1.25,40],"InvocationDuration":[45],"OldestRecordAge":[3050]}
}
