package faultnet

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Service is one AWS service behind a fault layer. It decides the wire shape
// of every answer the layer makes up: the JSON protocol version, the __type
// namespace, and the service's extra headers.
type Service string

// The services the fault layer speaks.
const (
	// Kinesis is Amazon Kinesis Data Streams (AWS JSON 1.1, target prefix
	// Kinesis_20131202).
	Kinesis Service = "kinesis"
	// DynamoDB is Amazon DynamoDB (AWS JSON 1.0, target prefix
	// DynamoDB_20120810).
	DynamoDB Service = "dynamodb"
	// SQS is Amazon SQS in its JSON protocol (AWS JSON 1.0, target prefix
	// AmazonSQS, query-compatible error codes in x-amzn-query-error).
	SQS Service = "sqs"
)

// account is the account id in made-up messages and ARNs: the one the
// stand-ins use.
const account = "000000000000"

// region is the region in made-up ARNs: the one the stand-ins' clients use.
const region = "us-east-1"

// kind is what a Fault does with a call.
type kind int

const (
	kindAnswer  kind = iota + 1 // answer an error; nothing reaches the stand-in
	kindPartial                 // forward the entries that succeed, answer the others failed
	kindCut                     // forward, then cut the answer mid-body
	kindLost                    // forward, then answer an error as if the answer was lost
	kindLatency                 // forward after a delay
)

// Fault is what a call matched by a Rule gets. The zero Fault is not valid:
// build one with a constructor (Throttled, PartialFailure, CutBody, ...). A
// Fault is a value; one may be used in any number of rules and on any number
// of AWS layers at once.
type Fault struct {
	kind  kind
	name  string                 // for String
	errs  map[Service]*wireError // kindAnswer, kindLost: the answer per service
	every int                    // kindPartial: every every-th entry fails
	code  string                 // kindPartial: the entries' error code
	delay time.Duration          // kindLatency
}

// String names the fault as its constructor does, e.g. "Throttled" or
// "PartialFailure(3, InternalFailure)".
func (f Fault) String() string {
	if f.name == "" {
		return "Fault(invalid)"
	}
	return f.name
}

// supports reports whether the fault has an answer for svc.
func (f Fault) supports(svc Service) bool {
	switch f.kind {
	case kindAnswer, kindLost:
		return f.errs[svc] != nil
	case kindPartial:
		return svc == Kinesis || svc == SQS
	case kindCut, kindLatency:
		return true
	}
	return false
}

// applies reports whether the fault can do anything to a call of op: a
// partial failure only to the batch writes.
func (f Fault) applies(svc Service, op string) bool {
	if f.kind != kindPartial {
		return true
	}
	switch svc {
	case Kinesis:
		return op == "PutRecords"
	case SQS:
		return op == "SendMessageBatch" || op == "DeleteMessageBatch" || op == "ChangeMessageVisibilityBatch"
	}
	return false
}

// wireError is one error answer as a service sends it.
type wireError struct {
	status int
	// typ is the body's __type: a bare code (Kinesis) or one with the
	// service's namespace ("com.amazonaws.dynamodb.v20120810#Code",
	// "com.amazonaws.sqs#Code").
	typ string
	// query is SQS's x-amzn-query-error value, "Code;Sender" or
	// "Code;Receiver"; empty for the other services.
	query string
	// message returns the body's message for a call.
	message func(c call) string
	// reasons adds DynamoDB's ThrottlingReasons with this limit type
	// (e.g. "ProvisionedThroughputExceeded") when the call names a table.
	reasons string
}

// call is what a made-up answer may quote from the request.
type call struct {
	op   string
	body []byte
}

// names returns the stream, shard and table the request body names, where
// it names them.
func (c call) names() (stream, shard, table string) {
	var v struct {
		StreamName string
		StreamARN  string
		ShardId    string
		TableName  string
	}
	_ = json.Unmarshal(c.body, &v) // a body without these names quotes none
	stream = v.StreamName
	if stream == "" && v.StreamARN != "" {
		stream = v.StreamARN[strings.LastIndex(v.StreamARN, "/")+1:]
	}
	return stream, v.ShardId, v.TableName
}

func fixed(msg string) func(call) string { return func(call) string { return msg } }

// dynamoType is the __type namespace DynamoDB puts before its codes.
const dynamoType = "com.amazonaws.dynamodb.v20120810#"

// sqsType is the __type namespace SQS puts before its codes.
const sqsType = "com.amazonaws.sqs#"

// Messages AWS documents or sends with these errors.
const (
	msgDynamoThroughput = "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."
	msgDynamoThrottling = "Rate of requests exceeds the allowed throughput."
	msgDynamoRequests   = "Throughput exceeds the current throughput limit for your account. Please contact AWS Support at https://aws.amazon.com/support request a limit increase"
	msgDynamoInternal   = "Internal server error"
	msgConditional      = "The conditional request failed"
	msgKinesisInternal  = "Internal Service Failure"
	msgKMSThrottling    = "The request was denied due to request throttling. For more information about throttling, see Limits in the AWS Key Management Service Developer Guide."
	msgSQSInternal      = "We encountered an internal error. Please try again."
	msgUnavailable      = "The request has failed due to a temporary failure of the server."
	msgSQSThrottled     = "Rate exceeded"
)

// kinesisRate is the message of Kinesis's ProvisionedThroughputExceededException.
func kinesisRate(c call) string {
	stream, shard, _ := c.names()
	switch {
	case stream != "" && shard != "":
		return fmt.Sprintf("Rate exceeded for shard %s in stream %s under account %s.", shard, stream, account)
	case stream != "":
		return fmt.Sprintf("Rate exceeded for stream %s under account %s.", stream, account)
	}
	return "Rate exceeded for shard."
}

// kinesisLimit is the message of Kinesis's LimitExceededException.
func kinesisLimit(c call) string {
	if stream, _, _ := c.names(); stream != "" {
		return fmt.Sprintf("Rate exceeded for stream %s under account %s.", stream, account)
	}
	return "Rate exceeded."
}

// sqsThrottled is SQS's throttling answer (RequestThrottled, HTTP 403 in the
// service model).
var sqsThrottled = &wireError{status: 403, typ: sqsType + "RequestThrottled", query: "RequestThrottled;Sender", message: fixed(msgSQSThrottled)}

// Throttled answers the service's provisioned-throughput throttling error:
// Kinesis and DynamoDB 400 ProvisionedThroughputExceededException (DynamoDB's
// with ThrottlingReasons naming the table, read or write by operation), SQS
// as SQSThrottled. The SDK retries it with backoff.
func Throttled() Fault {
	return Fault{kind: kindAnswer, name: "Throttled", errs: map[Service]*wireError{
		Kinesis:  {status: 400, typ: "ProvisionedThroughputExceededException", message: kinesisRate},
		DynamoDB: {status: 400, typ: dynamoType + "ProvisionedThroughputExceededException", message: fixed(msgDynamoThroughput), reasons: "ProvisionedThroughputExceeded"},
		SQS:      sqsThrottled,
	}}
}

// LimitExceeded answers Kinesis's 400 LimitExceededException (a control-plane
// or SubscribeToShard rate limit). The SDK retries it with backoff.
func LimitExceeded() Fault {
	return Fault{kind: kindAnswer, name: "LimitExceeded", errs: map[Service]*wireError{
		Kinesis: {status: 400, typ: "LimitExceededException", message: kinesisLimit},
	}}
}

// ExpiredIterator answers Kinesis's 400 ExpiredIteratorException (a
// GetRecords iterator older than five minutes). The SDK does not retry it.
func ExpiredIterator() Fault {
	return Fault{kind: kindAnswer, name: "ExpiredIterator", errs: map[Service]*wireError{
		Kinesis: {status: 400, typ: "ExpiredIteratorException", message: func(call) string {
			now := time.Now().UnixMilli()
			return fmt.Sprintf("Iterator expired. The iterator was created at time %d while right now it is %d which is further in the future than the tolerated delay of 300000 milliseconds.", now-300001, now)
		}},
	}}
}

// KMSThrottling answers Kinesis's 400 KMSThrottlingException (KMS throttled
// the stream's server-side encryption). The SDK does not retry it: its code
// is not among the SDK's throttling codes.
func KMSThrottling() Fault {
	return Fault{kind: kindAnswer, name: "KMSThrottling", errs: map[Service]*wireError{
		Kinesis: {status: 400, typ: "KMSThrottlingException", message: fixed(msgKMSThrottling)},
	}}
}

// InternalFailure answers the service's 500: Kinesis InternalFailure,
// DynamoDB InternalServerError, SQS InternalError (x-amzn-query-error
// InternalError;Receiver). The SDK retries it.
func InternalFailure() Fault {
	return Fault{kind: kindAnswer, name: "InternalFailure", errs: map[Service]*wireError{
		Kinesis:  {status: 500, typ: "InternalFailure", message: fixed(msgKinesisInternal)},
		DynamoDB: {status: 500, typ: dynamoType + "InternalServerError", message: fixed(msgDynamoInternal)},
		SQS:      {status: 500, typ: sqsType + "InternalError", query: "InternalError;Receiver", message: fixed(msgSQSInternal)},
	}}
}

// ServiceUnavailable answers 503 ServiceUnavailable, the common error of
// every AWS service. The SDK retries it.
func ServiceUnavailable() Fault {
	return Fault{kind: kindAnswer, name: "ServiceUnavailable", errs: map[Service]*wireError{
		Kinesis:  {status: 503, typ: "ServiceUnavailable", message: fixed(msgUnavailable)},
		DynamoDB: {status: 503, typ: "ServiceUnavailable", message: fixed(msgUnavailable)},
		SQS:      {status: 503, typ: "ServiceUnavailable", query: "ServiceUnavailable;Receiver", message: fixed(msgUnavailable)},
	}}
}

// ThrottlingException answers DynamoDB's 400 ThrottlingException, as
// DynamoDB sends it (__type com.amazon.coral.availability#ThrottlingException).
// The SDK retries it with backoff.
func ThrottlingException() Fault {
	return Fault{kind: kindAnswer, name: "ThrottlingException", errs: map[Service]*wireError{
		DynamoDB: {status: 400, typ: "com.amazon.coral.availability#ThrottlingException", message: fixed(msgDynamoThrottling)},
	}}
}

// RequestLimitExceeded answers DynamoDB's 400 RequestLimitExceeded (the
// account's throughput quota), with ThrottlingReasons naming the table. The
// SDK retries it with backoff.
func RequestLimitExceeded() Fault {
	return Fault{kind: kindAnswer, name: "RequestLimitExceeded", errs: map[Service]*wireError{
		DynamoDB: {status: 400, typ: dynamoType + "RequestLimitExceeded", message: fixed(msgDynamoRequests), reasons: "AccountLimitExceeded"},
	}}
}

// SQSThrottled answers SQS's throttling error as the service model and the
// SQS JSON protocol give it: 403, __type com.amazonaws.sqs#RequestThrottled,
// x-amzn-query-error RequestThrottled;Sender. The SDK returns it as
// *sqs/types.RequestThrottled and retries it with backoff.
func SQSThrottled() Fault {
	return Fault{kind: kindAnswer, name: "SQSThrottled", errs: map[Service]*wireError{SQS: sqsThrottled}}
}

// APIError answers any other error: status, code and message, shaped for the
// service as the constructors above are (DynamoDB and SQS put their namespace
// before the code; SQS also sends x-amzn-query-error code;Sender, or
// code;Receiver for a status of 500 or more). For example
// APIError(400, "ResourceInUseException", "...") for a SubscribeToShard
// while another subscription is open.
func APIError(status int, code, message string) Fault {
	sender := "Sender"
	if status >= 500 {
		sender = "Receiver"
	}
	return Fault{kind: kindAnswer, name: fmt.Sprintf("APIError(%d, %s)", status, code), errs: map[Service]*wireError{
		Kinesis:  {status: status, typ: code, message: fixed(message)},
		DynamoDB: {status: status, typ: dynamoType + code, message: fixed(message)},
		SQS:      {status: status, typ: sqsType + code, query: code + ";" + sender, message: fixed(message)},
	}}
}

// PartialFailure fails every failEvery-th entry of a batch write with code,
// and forwards only the others, so only they are written:
//
//   - Kinesis PutRecords answers 200 with FailedRecordCount counting the
//     failed entries and, in their places in Records, ErrorCode code and
//     ErrorMessage (AWS's own for ProvisionedThroughputExceededException and
//     InternalFailure, the two codes AWS uses there).
//   - SQS SendMessageBatch, DeleteMessageBatch and
//     ChangeMessageVisibilityBatch answer 200 with the failed entries in
//     Failed (Id, Code code, SenderFault false, Message).
//
// A batch whose entries all fail is answered without a call to the stand-in.
// An error answer of the stand-in is passed on unchanged. The fault applies
// to no other operation: a rule with this fault skips other calls. It panics
// if failEvery < 1 or code is empty.
func PartialFailure(failEvery int, code string) Fault {
	if failEvery < 1 || code == "" {
		panic(fmt.Sprintf("faultnet: PartialFailure(%d, %q): want failEvery >= 1 and a code", failEvery, code))
	}
	return Fault{kind: kindPartial, name: fmt.Sprintf("PartialFailure(%d, %s)", failEvery, code), every: failEvery, code: code}
}

// CutBody forwards the call, so it takes effect at the stand-in, then sends
// the stand-in's status and headers (Content-Length included) and the first
// half of its body, and closes the connection. For an answer of unknown
// length (an event stream) it sends half of the first bytes read. The SDK
// sees an unexpected EOF while reading or deserializing the answer.
func CutBody() Fault {
	return Fault{kind: kindCut, name: "CutBody"}
}

// LostResponse forwards the call, so it takes effect at the stand-in, then
// answers as if the answer had been lost and the SDK's retry had failed:
// DynamoDB 400 ConditionalCheckFailedException (meant for conditional
// writes: the retry's condition fails because the first attempt's write
// happened); Kinesis and SQS their 500 (InternalFailure / InternalError), an
// ambiguous failure after the write. An error answer of the stand-in is
// passed on unchanged.
func LostResponse() Fault {
	return Fault{kind: kindLost, name: "LostResponse", errs: map[Service]*wireError{
		DynamoDB: {status: 400, typ: dynamoType + "ConditionalCheckFailedException", message: fixed(msgConditional)},
		Kinesis:  {status: 500, typ: "InternalFailure", message: fixed(msgKinesisInternal)},
		SQS:      {status: 500, typ: sqsType + "InternalError", query: "InternalError;Receiver", message: fixed(msgSQSInternal)},
	}}
}

// Latency forwards the call after d. The wait ends early, without a call to
// the stand-in, when the client gives up or the AWS layer is closed. It
// panics if d is negative.
func Latency(d time.Duration) Fault {
	if d < 0 {
		panic(fmt.Sprintf("faultnet: Latency(%v): negative", d))
	}
	return Fault{kind: kindLatency, name: fmt.Sprintf("Latency(%v)", d), delay: d}
}
