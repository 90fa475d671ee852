package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kt "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func main() {
	ctx := context.Background()
	k := kinesis.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")},
		func(o *kinesis.Options) { o.BaseEndpoint = aws.String(os.Getenv("AWS_ENDPOINT_URL_KINESIS")) })
	batch, _ := strconv.Atoi(os.Args[1])
	conc, _ := strconv.Atoi(os.Args[2])
	total, _ := strconv.Atoi(os.Args[3])
	name := fmt.Sprintf("scratch-%d", time.Now().UnixNano())
	_, err := k.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: &name, ShardCount: aws.Int32(4)})
	if err != nil {
		panic(err)
	}
	for {
		o, _ := k.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: &name})
		if o != nil && o.StreamDescriptionSummary.StreamStatus == kt.StreamStatusActive {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	data := make([]byte, 512)
	start := time.Now()
	ch := make(chan int)
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for i := range ch {
				es := make([]kt.PutRecordsRequestEntry, batch)
				for j := range es {
					es[j] = kt.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprintf("%d-%d", i, j))}
				}
				t := time.Now()
				_, err := k.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: &name, Records: es})
				if err != nil {
					panic(err)
				}
				if i%10 == 0 {
					fmt.Printf("batch %d: %v\n", i, time.Since(t))
				}
			}
		})
	}
	for i := 0; i < total/batch; i++ {
		ch <- i
	}
	close(ch)
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("batch %d conc %d: %d records in %v = %.0f/s\n", batch, conc, total, el, float64(total)/el.Seconds())
	// read speed at various limits, one shard
	for _, lim := range []int32{100, 250, 500, 1000} {
		it, _ := k.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: &name, ShardId: aws.String("shardId-000000000000"), ShardIteratorType: kt.ShardIteratorTypeTrimHorizon})
		t := time.Now()
		o, err := k.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: &lim})
		if err != nil {
			panic(err)
		}
		fmt.Printf("GetRecords limit %d: %d records in %v\n", lim, len(o.Records), time.Since(t))
	}
	k.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: &name})
}
