package awserr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	qtypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// sdk wraps err as the SDK returns the error of a call whose answer had
// status (0: no answer came): an operation error around the HTTP response
// error.
func sdk(service, op string, status int, err error) error {
	return &smithy.OperationError{ServiceID: service, OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err},
		RequestID:     "req-1",
	}}
}

func dial() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "connection refused", Addr: "127.0.0.1:1"}}
}

func reset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

var classifyCases = []struct {
	name string
	err  error
	want Kind
}{
	{"nil", nil, Other},
	{"plain error", errors.New("something else"), Other},
	{"unknown code", sdk("Kinesis", "PutRecord", 400, &smithy.GenericAPIError{Code: "SomethingElse", Message: "no"}), Other},
	{"unknown typed exception", sdk("Kinesis", "GetRecords", 400, &ktypes.ExpiredIteratorException{Message: aws.String("expired")}), Other},
	{"4xx without a code", sdk("Kinesis", "PutRecord", 404, errors.New("not found page")), Other},

	{"kinesis throughput", &ktypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}, Throttled},
	{"kinesis throughput in the SDK's wrapping", sdk("Kinesis", "PutRecords", 400, &ktypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded")}), Throttled},
	{"kinesis limit", &ktypes.LimitExceededException{Message: aws.String("limit")}, Throttled},
	{"kinesis kms throttling", &ktypes.KMSThrottlingException{Message: aws.String("kms")}, Throttled},
	{"dynamodb throughput", sdk("DynamoDB", "UpdateItem", 400, &dtypes.ProvisionedThroughputExceededException{Message: aws.String("slow down")}), Throttled},
	{"dynamodb throttling", sdk("DynamoDB", "PutItem", 400, &dtypes.ThrottlingException{Message: aws.String("slow down")}), Throttled},
	{"dynamodb request limit", &dtypes.RequestLimitExceeded{Message: aws.String("account limit")}, Throttled},
	{"sqs throttled", sdk("SQS", "SendMessage", 400, &qtypes.RequestThrottled{Message: aws.String("Request is throttled.")}), Throttled},
	{"sqs kms throttled", &qtypes.KmsThrottled{Message: aws.String("kms")}, Throttled},
	{"ThrottlingException code", &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}, Throttled},
	{"Throttling code in a 400", sdk("DynamoDB", "Scan", 400, &smithy.GenericAPIError{Code: "Throttling", Message: "slow down"}), Throttled},
	{"429", sdk("Kinesis", "PutRecord", 429, errors.New("too many requests")), Throttled},
	{"throttled after the SDK's attempts", sdk("Kinesis", "PutRecords", 400, &retry.MaxAttemptsError{Attempt: 3, Err: &ktypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded")}}), Throttled},

	{"kinesis stream not found", sdk("Kinesis", "PutRecord", 400, &ktypes.ResourceNotFoundException{Message: aws.String("Stream orders not found")}), NotFound},
	{"dynamodb table not found", sdk("DynamoDB", "DescribeTable", 400, &dtypes.ResourceNotFoundException{Message: aws.String("Requested resource not found")}), NotFound},
	{"sqs queue does not exist", sdk("SQS", "SendMessage", 400, &qtypes.QueueDoesNotExist{Message: aws.String("The specified queue does not exist."), ErrorCodeOverride: aws.String("AWS.SimpleQueueService.NonExistentQueue")}), NotFound},
	{"NonExistentQueue code", &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue", Message: "no queue"}, NotFound},

	{"conditional check failed", sdk("DynamoDB", "UpdateItem", 400, &dtypes.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}), ConditionFailed},
	{"conditional check failed code", &smithy.GenericAPIError{Code: "ConditionalCheckFailedException", Message: "The conditional request failed"}, ConditionFailed},

	{"kinesis validation", &ktypes.ValidationException{Message: aws.String("bad request")}, Invalid},
	{"kinesis invalid argument", sdk("Kinesis", "PutRecord", 400, &ktypes.InvalidArgumentException{Message: aws.String("bad key")}), Invalid},
	{"dynamodb validation code", sdk("DynamoDB", "UpdateItem", 400, &smithy.GenericAPIError{Code: "ValidationException", Message: "The provided key element does not match the schema"}), Invalid},
	{"sqs invalid contents", &qtypes.InvalidMessageContents{Message: aws.String("bad characters")}, Invalid},

	{"sqs batch too long", sdk("SQS", "SendMessageBatch", 400, &qtypes.BatchRequestTooLong{Message: aws.String("too long")}), TooLarge},
	{"dynamodb item collection", &dtypes.ItemCollectionSizeLimitExceededException{Message: aws.String("10 GB")}, TooLarge},

	{"kinesis access denied", &ktypes.AccessDeniedException{Message: aws.String("denied")}, AccessDenied},
	{"kinesis kms access denied", sdk("Kinesis", "PutRecord", 400, &ktypes.KMSAccessDeniedException{Message: aws.String("kms denied")}), AccessDenied},
	{"kinesis kms not found", &ktypes.KMSNotFoundException{Message: aws.String("no key")}, AccessDenied},
	{"sqs kms disabled", &qtypes.KmsDisabled{Message: aws.String("disabled")}, AccessDenied},
	{"AccessDeniedException code", sdk("DynamoDB", "PutItem", 400, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "no"}), AccessDenied},

	{"dynamodb table exists", sdk("DynamoDB", "CreateTable", 400, &dtypes.ResourceInUseException{Message: aws.String("Table already exists: leases")}), InUse},
	{"kinesis consumer exists", &ktypes.ResourceInUseException{Message: aws.String("consumer exists")}, InUse},

	{"unknown operation", sdk("DynamoDB", "UpdateTimeToLive", 400, &smithy.GenericAPIError{Code: "UnknownOperationException", Message: "unknown"}), Unsupported},
	{"unknown operation without a status", &smithy.GenericAPIError{Code: "UnknownOperationException", Message: "unknown"}, Unsupported},

	{"kinesis internal failure", &ktypes.InternalFailureException{Message: aws.String("internal")}, ServerError},
	{"dynamodb internal server error", sdk("DynamoDB", "GetItem", 500, &dtypes.InternalServerError{Message: aws.String("internal")}), ServerError},
	{"503 without a code", sdk("Kinesis", "PutRecord", 503, errors.New("service unavailable")), ServerError},
	{"InternalFailure code", &smithy.GenericAPIError{Code: "InternalFailure", Message: "scripted"}, ServerError},
	{"server fault of an unknown code", &smithy.GenericAPIError{Code: "Whatever", Message: "boom", Fault: smithy.FaultServer}, ServerError},
	{"unknown code in a 502", sdk("SQS", "SendMessage", 502, &smithy.GenericAPIError{Code: "SomethingElse", Message: "bad gateway"}), ServerError},

	{"connection reset", &smithyhttp.RequestSendError{Err: reset()}, NoAnswer},
	{"connection reset in the SDK's wrapping", sdk("Kinesis", "PutRecords", 0, &smithyhttp.RequestSendError{Err: reset()}), NoAnswer},
	{"answer cut mid-body", &smithy.DeserializationError{Err: io.ErrUnexpectedEOF}, NoAnswer},
	{"attempt timed out", &smithyhttp.RequestSendError{Err: context.DeadlineExceeded}, NoAnswer},
	{"deadline passed in flight", sdk("Kinesis", "PutRecords", 0, &smithy.CanceledError{Err: context.DeadlineExceeded}), NoAnswer},
	{"canceled in flight", sdk("Kinesis", "PutRecords", 0, &smithy.CanceledError{Err: context.Canceled}), NoAnswer},
	{"success answer unreadable", sdk("Kinesis", "PutRecord", 200, errors.New("bad body")), NoAnswer},
	{"net error", reset(), NoAnswer},
	{"context.DeadlineExceeded", context.DeadlineExceeded, NoAnswer},
	{"io.ErrUnexpectedEOF", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), NoAnswer},
	{"io.EOF", io.EOF, NoAnswer},

	{"connection refused", &smithyhttp.RequestSendError{Err: dial()}, NotSent},
	{"connection refused in the SDK's wrapping", sdk("Kinesis", "PutRecords", 0, &smithyhttp.RequestSendError{Err: dial()}), NotSent},
	{"connection refused after the SDK's attempts", &retry.MaxAttemptsError{Attempt: 3, Err: sdk("Kinesis", "PutRecords", 0, &smithyhttp.RequestSendError{Err: dial()})}, NotSent},

	{"context.Canceled", context.Canceled, Canceled},
	{"context.Canceled wrapped", fmt.Errorf("waiting to retry: %w", context.Canceled), Canceled},
}

func TestClassify(t *testing.T) {
	seen := map[Kind]bool{}
	for _, tc := range classifyCases {
		seen[tc.want] = true
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
	for k := range kinds {
		if !seen[k] {
			t.Errorf("no case of kind %v", k)
		}
	}
}

func TestClassifyCode(t *testing.T) {
	tests := []struct {
		code string
		want Kind
	}{
		{"", Other},
		{"Whatever", Other},
		{"ProvisionedThroughputExceededException", Throttled},
		{"KMSThrottlingException", Throttled},
		{"KmsThrottled", Throttled},
		{"ResourceNotFoundException", NotFound},
		{"AWS.SimpleQueueService.NonExistentQueue", NotFound},
		{"InternalFailure", ServerError},
		{"InternalError", ServerError},
		{"ValidationException", Invalid},
		{"InvalidArgumentException", Invalid},
		{"KMSAccessDeniedException", AccessDenied},
		{"KMSOptInRequired", AccessDenied},
		{"ConditionalCheckFailedException", ConditionFailed},
		{"ResourceInUseException", InUse},
		{"UnknownOperationException", Unsupported},
	}
	for _, tt := range tests {
		if got := ClassifyCode(tt.code); got != tt.want {
			t.Errorf("ClassifyCode(%q) = %v, want %v", tt.code, got, tt.want)
		}
	}
}

func TestKindString(t *testing.T) {
	for k := range kinds {
		if k.String() == "" {
			t.Errorf("kind %d has no name", k)
		}
	}
	if got, want := Kind(200).String(), "kind(200)"; got != want {
		t.Errorf("Kind(200) = %q, want %q", got, want)
	}
}
