package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Settings of every client: the stand-ins accept any signature.
const (
	region          = "us-east-1"
	accessKeyID     = "test"
	secretAccessKey = "test"
	// putBatch is the number of records per PutRecords call (the AWS
	// maximum).
	putBatch = 500
	// writers is the number of concurrent PutRecords callers.
	writers = 4
	// pollInterval is the pause between DescribeStreamSummary polls.
	pollInterval = 20 * time.Millisecond
	// setupTimeout bounds creating or deleting a stream.
	setupTimeout = 30 * time.Second
)

// awsConfig is the configuration of every client: static credentials, the
// region, and the SDK's standard retryer without its client-side retry
// quota (a benchmark must not slow down because of earlier retries). Every
// failed attempt the retryer retries is counted in retries and, for the
// first few, reported on stderr: a retried write may have been applied
// already.
func awsConfig(service string, retries *atomic.Int64) aws.Config {
	return aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider(accessKeyID, secretAccessKey, ""),
		Retryer: func() aws.Retryer {
			std := retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None })
			return countingRetryer{RetryerV2: std, service: service, n: retries}
		},
	}
}

// countingRetryer counts the errors its retryer retries.
type countingRetryer struct {
	aws.RetryerV2
	service string
	n       *atomic.Int64
}

// IsErrorRetryable implements aws.Retryer.
func (r countingRetryer) IsErrorRetryable(err error) bool {
	ok := r.RetryerV2.IsErrorRetryable(err)
	if ok && r.n != nil {
		if n := r.n.Add(1); n <= 5 {
			fmt.Fprintf(os.Stderr, "bench: %s attempt failed, retrying: %v\n", r.service, err)
		}
	}
	return ok
}

func newKinesis(endpoint string, retries *atomic.Int64) *kinesis.Client {
	return kinesis.NewFromConfig(awsConfig("Kinesis", retries), func(o *kinesis.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// newDynamoDB returns a DynamoDB client of endpoint; optFns change its
// options further.
func newDynamoDB(endpoint string, retries *atomic.Int64, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	optFns = append([]func(*dynamodb.Options){func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) }}, optFns...)
	return dynamodb.NewFromConfig(awsConfig("DynamoDB", retries), optFns...)
}

// record is one record to write.
type record struct {
	key  string
	data []byte
}

// makeRecords returns n records of size bytes: the payload starts with the
// record's id (idWidth decimal digits, 0..n-1) and is filled with
// pseudo-random bytes; the partition key is 16 pseudo-random hex digits.
// The generator has a fixed seed, so every run writes the same records.
func makeRecords(n, size int) []record {
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]record, n)
	for i := range recs {
		data := make([]byte, size)
		copy(data, formatID(i))
		for j := idWidth; j < size; j++ {
			data[j] = byte(rng.Uint32())
		}
		recs[i] = record{key: fmt.Sprintf("%016x", rng.Uint64()), data: data}
	}
	return recs
}

// formatID returns id as idWidth decimal digits.
func formatID(id int) string {
	s := strconv.Itoa(id)
	for len(s) < idWidth {
		s = "0" + s
	}
	return s
}

// parseID returns the id at the start of a payload, or -1.
func parseID(p []byte) int {
	if len(p) < idWidth {
		return -1
	}
	id := 0
	for _, c := range p[:idWidth] {
		if c < '0' || c > '9' {
			return -1
		}
		id = id*10 + int(c-'0')
	}
	return id
}

// createStream creates a provisioned stream and waits until it is ACTIVE.
func (c *clients) createStream(ctx context.Context, name string, shards int) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	_, err := c.kinesis.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName:        aws.String(name),
		ShardCount:        aws.Int32(int32(shards)),
		StreamModeDetails: &kinesistypes.StreamModeDetails{StreamMode: kinesistypes.StreamModeProvisioned},
	})
	if err != nil {
		return fmt.Errorf("create stream %s: %w", name, err)
	}
	for {
		out, err := c.kinesis.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("stream %s did not become ACTIVE: %w", name, err)
		}
		if out.StreamDescriptionSummary.StreamStatus == kinesistypes.StreamStatusActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream %s did not become ACTIVE: %w", name, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// deleteStream deletes a stream.
func (c *clients) deleteStream(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	_, err := c.kinesis.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(name), EnforceConsumerDeletion: aws.Bool(true)})
	var missing *kinesistypes.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		return err
	}
	return nil
}

// writeStat describes the writing of one stream.
type writeStat struct {
	Stream  string        `json:"stream"`
	Records int           `json:"records"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Calls   int           `json:"calls"`
	// Retried is the number of records PutRecords reported failed and that
	// were written again.
	Retried int `json:"retried"`
}

// write writes recs to stream with PutRecords batches of putBatch, writers
// batches at a time, writing failed entries again until all are in.
func (c *clients) write(ctx context.Context, stream string, recs []record) (writeStat, error) {
	st := writeStat{Stream: stream, Records: len(recs)}
	start := time.Now()
	batches := make(chan []record)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for b := range batches {
				calls, retried, err := c.putAll(ctx, stream, b)
				mu.Lock()
				st.Calls += calls
				st.Retried += retried
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for i := 0; i < len(recs); i += putBatch {
		batches <- recs[i:min(i+putBatch, len(recs))]
	}
	close(batches)
	wg.Wait()
	st.Elapsed = time.Since(start)
	return st, firstErr
}

// putAll writes one batch, again and again for the entries that failed.
func (c *clients) putAll(ctx context.Context, stream string, b []record) (calls, retried int, err error) {
	for attempt := 0; len(b) > 0; attempt++ {
		if attempt == 10 {
			return calls, retried, fmt.Errorf("put records to %s: %d records still failing after %d attempts", stream, len(b), attempt)
		}
		entries := make([]kinesistypes.PutRecordsRequestEntry, len(b))
		for i, r := range b {
			entries[i] = kinesistypes.PutRecordsRequestEntry{Data: r.data, PartitionKey: aws.String(r.key)}
		}
		calls++
		out, err := c.kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			return calls, retried, fmt.Errorf("put records to %s: %w", stream, err)
		}
		if aws.ToInt32(out.FailedRecordCount) == 0 {
			return calls, retried, nil
		}
		var again []record
		for i, e := range out.Records {
			if e.ErrorCode != nil {
				again = append(again, b[i])
			}
		}
		retried += len(again)
		b = again
		time.Sleep(100 * time.Millisecond)
	}
	return calls, retried, nil
}
