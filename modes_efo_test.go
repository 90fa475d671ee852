package lambdaadapter_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest/awsfake"
)

// fanOutFake is the in-memory Kinesis with the calls of enhanced fan-out
// (consumer.FanOutAPI), which New checks for; these tests never call them.
type fanOutFake struct{ *awsfake.Kinesis }

var errNoFanOut = errors.New("fanOutFake: not implemented")

func (fanOutFake) RegisterStreamConsumer(context.Context, *kinesis.RegisterStreamConsumerInput, ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error) {
	return nil, errNoFanOut
}

func (fanOutFake) DescribeStreamConsumer(context.Context, *kinesis.DescribeStreamConsumerInput, ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	return nil, errNoFanOut
}

func (fanOutFake) SubscribeToShard(context.Context, *kinesis.SubscribeToShardInput, ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	return nil, errNoFanOut
}

// TestEnhancedFanOutNeedsSubscribeToShard: WithEnhancedFanOut with a
// Kinesis client that cannot subscribe is an error at NewService, naming what is
// missing; with one that can, the consumer is built.
func TestEnhancedFanOutNeedsSubscribeToShard(t *testing.T) {
	base := []lambdaadapter.ServiceOption{
		lambdaadapter.WithStream("orders"), lambdaadapter.WithEnhancedFanOut("orders-app"),
	}
	_, err := lambdaadapter.NewService(modesAck, append(base, lambdaadapter.WithKinesisClient(awsfake.NewKinesis()))...)
	if err == nil || !strings.Contains(err.Error(), "SubscribeToShard") {
		t.Errorf("New with a client without SubscribeToShard: %v, want an error naming it", err)
	}
	if _, err := lambdaadapter.NewService(modesAck, append(base, lambdaadapter.WithKinesisClient(fanOutFake{awsfake.NewKinesis()}))...); err != nil {
		t.Errorf("New with a fan-out client: %v", err)
	}
	_, err = lambdaadapter.NewService(modesAck, append(base, lambdaadapter.WithKinesisClient(fanOutFake{awsfake.NewKinesis()}), lambdaadapter.WithEnhancedFanOut("orders app"))...)
	if err == nil || !strings.Contains(err.Error(), `"orders app"`) {
		t.Errorf("New with a consumer name Kinesis refuses: %v", err)
	}
}
