//go:build integration

package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/envelope"
	"github.com/shardsettle/lambdaadapter/internal/publish"
)

// service is an AWS service a process reaches through the fault layer.
type service string

const (
	svcKinesis  service = "kinesis"
	svcDynamoDB service = "dynamodb"
	svcSQS      service = "sqs"
)

// endpointVar is the SDK's endpoint variable of the service.
func (s service) endpointVar() string { return "AWS_ENDPOINT_URL_" + strings.ToUpper(string(s)) }

// netLayer gives every process its own path to each stand-in and injects
// the network faults on them.
type netLayer interface {
	// route returns the endpoint process proc uses for svc, creating its
	// route on first use. A route created while an error burst of its
	// service is active gets it too.
	route(proc string, svc service) (string, error)
	// cut cuts proc off from svc: connections refused, or with blackHole
	// the data dropped and the connections held (calls time out).
	cut(proc string, svc service, blackHole bool) (restore func(), err error)
	// burst makes e's AWS errors (e.Fault on e.Ops at e.Rate) on every
	// route of svc.
	burst(svc service, e Event) (remove func(), err error)
}

// runSchedule carries the plan out: each event at its time, in a goroutine
// of its own (faults overlap), until the run's duration has passed and
// every fault has ended.
func (s *soak) runSchedule(ctx context.Context) {
	var wg sync.WaitGroup
	for _, e := range s.plan.Events {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(s.start.Add(e.At))):
		}
		wg.Go(func() { s.apply(e) })
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(s.start.Add(s.plan.Shape.Duration))):
	}
	wg.Wait()
}

// apply carries one event out and records its window as applied.
func (s *soak) apply(e Event) {
	switch e.Kind {
	case KindKill, KindSIGTERM:
		w := s.fleet.slot(e.Slot)
		from := time.Now()
		if e.Kind == KindKill {
			w.signal(syscall.SIGKILL, StopKill, killBound)
		} else {
			w.signal(syscall.SIGTERM, StopSIGTERM, exitBound)
		}
		s.window(Window{Kind: e.Kind, Worker: w.name, Start: from, End: time.Now(), Detail: fmt.Sprintf("%s (%v)", w.cmd.ProcessState, time.Since(from).Round(time.Millisecond))})
		s.logf("%s of %s: %v", e.Kind, w.name, w.cmd.ProcessState)
		time.Sleep(e.Replace)
		s.fleet.startSlot(e.Slot)
	case KindPause:
		w := s.fleet.slot(e.Slot)
		s.logf("SIGSTOP of %s for %v", w.name, e.For.Round(time.Millisecond))
		from, to := w.pause(e.For)
		s.window(Window{Kind: e.Kind, Worker: w.name, Start: from, End: to, Detail: fmt.Sprintf("stopped %v", to.Sub(from).Round(time.Millisecond))})
	case KindCutDynamoDB, KindCutKinesis:
		w := s.fleet.slot(e.Slot)
		svc := svcDynamoDB
		if e.Kind == KindCutKinesis {
			svc = svcKinesis
		}
		from := time.Now()
		restore, err := s.net.cut(w.name, svc, e.BlackHole)
		if err != nil {
			s.harnessError("cut %s off from %s: %v", w.name, svc, err)
			return
		}
		s.logf("%s %s for %v", w.name, e.Kind, e.For.Round(time.Millisecond))
		time.Sleep(e.For)
		restore()
		s.window(Window{Kind: e.Kind, Worker: w.name, Start: from, End: time.Now(), Detail: e.describe()})
	case KindErrorsKinesis, KindErrorsDynamoDB, KindErrorsSQS:
		svc := map[Kind]service{KindErrorsKinesis: svcKinesis, KindErrorsDynamoDB: svcDynamoDB, KindErrorsSQS: svcSQS}[e.Kind]
		from := time.Now()
		remove, err := s.net.burst(svc, e)
		if err != nil {
			s.harnessError("%s: %v", e.describe(), err)
			return
		}
		s.logf("%s", e.describe())
		time.Sleep(e.For)
		remove()
		s.window(Window{Kind: e.Kind, Start: from, End: time.Now(), Detail: e.describe()})
	case KindSlow:
		from := time.Now()
		s.prodE.setSlow(e.Sleep)
		s.prodL.setSlow(e.Sleep)
		time.Sleep(e.For)
		s.prodE.setSlow(0)
		s.prodL.setSlow(0)
		// The records produced in the window are handled a little later.
		s.window(Window{Kind: e.Kind, Start: from, End: time.Now(), Detail: e.describe()})
	case KindSplit, KindMerge:
		from := time.Now()
		shard, detail, err := s.reshard(e)
		if err != nil {
			s.harnessError("%s: %v", e.Kind, err)
			return
		}
		s.logf("%s", detail)
		s.window(Window{Kind: e.Kind, Shard: shard, Start: from, End: time.Now(), Detail: detail})
	case KindOutage:
		from := time.Now()
		if err := os.WriteFile(s.outageFile, nil, 0o644); err != nil {
			s.harnessError("create the outage file: %v", err)
			return
		}
		s.logf("downstream outage for %v", e.For)
		time.Sleep(e.For)
		if err := os.Remove(s.outageFile); err != nil {
			s.harnessError("remove the outage file: %v", err)
		}
		s.window(Window{Kind: e.Kind, Start: from, End: time.Now(), Detail: e.describe()})
		s.logf("downstream outage over")
	}
}

// reshard splits an open shard of the long-running stream at the middle
// of its hash key range, or merges two adjacent open ones, and waits until
// the stream is ACTIVE again.
func (s *soak) reshard(e Event) (shard, detail string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var open []kinesistypes.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(s.ecsStream)}
	for {
		out, err := s.env.Kinesis.ListShards(ctx, in)
		if err != nil {
			return "", "", err
		}
		for _, sh := range out.Shards {
			if sh.SequenceNumberRange.EndingSequenceNumber == nil {
				open = append(open, sh)
			}
		}
		if out.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
	hash := func(s *string) *big.Int { n, _ := new(big.Int).SetString(aws.ToString(s), 10); return n }
	slices.SortFunc(open, func(a, b kinesistypes.Shard) int {
		return hash(a.HashKeyRange.StartingHashKey).Cmp(hash(b.HashKeyRange.StartingHashKey))
	})
	if e.Kind == KindSplit {
		sh := open[int(e.Pick*float64(len(open)))]
		mid := new(big.Int).Add(hash(sh.HashKeyRange.StartingHashKey), hash(sh.HashKeyRange.EndingHashKey))
		mid.Rsh(mid, 1).Add(mid, big.NewInt(1))
		_, err = s.env.Kinesis.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(s.ecsStream), ShardToSplit: sh.ShardId, NewStartingHashKey: aws.String(mid.String())})
		shard, detail = aws.ToString(sh.ShardId), "split "+aws.ToString(sh.ShardId)
	} else {
		var pairs [][2]kinesistypes.Shard
		for i := 0; i+1 < len(open); i++ {
			if new(big.Int).Add(hash(open[i].HashKeyRange.EndingHashKey), big.NewInt(1)).Cmp(hash(open[i+1].HashKeyRange.StartingHashKey)) == 0 {
				pairs = append(pairs, [2]kinesistypes.Shard{open[i], open[i+1]})
			}
		}
		if len(pairs) == 0 {
			return "", "", fmt.Errorf("no two adjacent open shards among %d", len(open))
		}
		p := pairs[int(e.Pick*float64(len(pairs)))]
		_, err = s.env.Kinesis.MergeShards(ctx, &kinesis.MergeShardsInput{StreamName: aws.String(s.ecsStream), ShardToMerge: p[0].ShardId, AdjacentShardToMerge: p[1].ShardId})
		shard, detail = aws.ToString(p[0].ShardId), "merge "+aws.ToString(p[0].ShardId)+" and "+aws.ToString(p[1].ShardId)
	}
	if err != nil {
		return "", "", err
	}
	for {
		out, err := s.env.Kinesis.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(s.ecsStream)})
		if err != nil {
			return "", "", err
		}
		if out.StreamDescriptionSummary.StreamStatus == kinesistypes.StreamStatusActive {
			return shard, detail, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readQuiet is how long the read-back of a stream waits for nothing more
// to arrive (every process has stopped by then). A queue's read-back waits
// longer than ReceiveAll's visibility timeout (5 s): the messages of a
// receive whose answer was lost (the SDK retried it) come again by then.
const (
	readQuiet      = 2 * time.Second
	readQuietQueue = 6 * time.Second
)

// readStream reads every record of a source stream back: originals and
// counted copies (x-ruststream-retry-count).
func (s *soak) readStream(mode Mode, stream string) []StreamRecord {
	var out []StreamRecord
	for _, r := range s.env.ReadAll(s.t.Context(), s.t, stream, math.MaxInt, readQuiet) {
		h, payload := envelope.Decode(r.Data)
		n, _ := strconv.Atoi(h.Get("x-ruststream-retry-count"))
		out = append(out, StreamRecord{Mode: mode, Shard: r.ShardID, Seq: aws.ToString(r.SequenceNumber), ID: payloadID(payload), RetryCount: n})
	}
	return out
}

// readDeadLetterQueue reads every dead letter of an SQS dead-letter queue.
func (s *soak) readDeadLetterQueue(mode Mode, url string) []DeadLetter {
	var out []DeadLetter
	for _, m := range s.env.ReceiveAll(s.t.Context(), s.t, url, math.MaxInt, readQuietQueue) {
		d, err := publish.ParseDeadLetterBody([]byte(aws.ToString(m.Body)))
		if err != nil {
			s.harnessError("a dead letter in %s does not parse: %v", url, err)
			continue
		}
		out = append(out, DeadLetter{Mode: mode, ID: payloadID(d.Payload), Attempts: d.Attempts, Reason: d.Reason})
	}
	return out
}

// readDeadLetterStream reads every dead letter of a dead-letter stream.
func (s *soak) readDeadLetterStream(mode Mode, stream string) []DeadLetter {
	var out []DeadLetter
	for _, r := range s.env.ReadAll(s.t.Context(), s.t, stream, math.MaxInt, readQuiet) {
		h, payload := envelope.Decode(r.Data)
		n, _ := strconv.Atoi(h.Get("x-dead-letter-attempts"))
		out = append(out, DeadLetter{Mode: mode, ID: payloadID(payload), Attempts: n, Reason: h.Get("x-dead-letter-reason")})
	}
	return out
}

// payloadID returns the "id" of a producer's JSON payload ("" for another).
func payloadID(payload []byte) string {
	var p struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(payload, &p)
	return p.ID
}
