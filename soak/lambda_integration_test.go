//go:build integration

package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/shardsettle/lambdaadapter/integration/standin"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// Names of the Lambda side's processes on the fault layer: the function
// (its copy, dead-letter and delay writes) and the event source (its reads
// of the stream and the delay queue).
const (
	procFunction    = "lambda"
	procEventSource = "eventsource"
)

// lambdaPhase is Lambda mode under the same AWS faults: the bootstrap under
// the Runtime Interface Emulator, driven by lambdaadaptertest.EventSource,
// its writes and the event source's reads each through their own routes.
type lambdaPhase struct {
	s      *soak
	rie    *exec.Cmd
	exited chan struct{}
	url    string
	log    *os.File

	stopc, done chan struct{}

	mu        sync.Mutex
	partial   []byte
	logLines  []Line
	invs      []Invocation
	roundErrs int
	lastErr   string
}

func startLambda(s *soak) *lambdaPhase {
	t := s.t
	l := &lambdaPhase{s: s, stopc: make(chan struct{}), done: make(chan struct{})}
	var err error
	if l.log, err = os.Create(filepath.Join(s.out, "lambda.log")); err != nil {
		t.Fatal(err)
	}
	fnKinesis, err1 := s.net.route(procFunction, svcKinesis)
	fnSQS, err2 := s.net.route(procFunction, svcSQS)
	esKinesis, err3 := s.net.route(procEventSource, svcKinesis)
	esSQS, err4 := s.net.route(procEventSource, svcSQS)
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			t.Fatalf("soak: Lambda routes: %v", err)
		}
	}
	env := append(baseEnviron(),
		"AWS_REGION="+standin.Region, "AWS_ACCESS_KEY_ID="+standin.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+standin.SecretAccessKey,
		svcKinesis.endpointVar()+"="+fnKinesis, svcSQS.endpointVar()+"="+fnSQS,
		"AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(functionTimeout),
		"AWS_LAMBDA_LOG_FORMAT=JSON", "AWS_LAMBDA_LOG_LEVEL=DEBUG", "LAMBDAADAPTER_LOG_LEVEL=debug",
		fmt.Sprintf("LAMBDAADAPTER_MAX_ATTEMPTS=%d", maxAttempts),
		"LAMBDAADAPTER_DEAD_LETTER_STREAM="+s.lambdaDL,
		"LAMBDAADAPTER_DELAY_QUEUE="+s.lambdaDelays,
		"LAMBDAADAPTER_DEMO_OUTAGE_FILE="+s.outageFile,
	)
	for attempt := 1; ; attempt++ {
		err := l.startRIE(env)
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatalf("soak: the emulator did not start: %v", err)
		}
	}
	t.Cleanup(l.kill)

	cfg := s.env.Config
	src := &lambdaadaptertest.EventSource{
		StreamARN: s.lambdaStreamARN,
		Kinesis:   kinesis.NewFromConfig(cfg, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(esKinesis) }),
		BatchSize: 100,
		Timeout:   2 * functionTimeout * time.Second,
		// One emulator takes one invocation at a time.
		MaxConcurrency:    1,
		QueueURL:          s.lambdaDelays,
		SQS:               sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(esSQS) }),
		VisibilityTimeout: 10 * time.Second,
	}
	fn := lambdaadaptertest.InvokeAPI(l.url, &http.Client{Timeout: 3 * functionTimeout * time.Second})
	go l.loop(src, fn)
	return l
}

// startRIE starts the emulator with the bootstrap as its function on free
// loopback ports and waits until it listens.
func (l *lambdaPhase) startRIE(env []string) error {
	invoke, runtime := freePort(l.s.t), freePort(l.s.t)
	cmd := exec.Command(l.s.rie, "--runtime-interface-emulator-address", "127.0.0.1:"+invoke,
		"--runtime-api-address", "127.0.0.1:"+runtime, l.s.bootstrap)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = l, l
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c1, err1 := net.DialTimeout("tcp", "127.0.0.1:"+invoke, 100*time.Millisecond)
		c2, err2 := net.DialTimeout("tcp", "127.0.0.1:"+runtime, 100*time.Millisecond)
		for _, c := range []net.Conn{c1, c2} {
			if c != nil {
				c.Close()
			}
		}
		if err1 == nil && err2 == nil {
			break
		}
		select {
		case <-exited:
			return fmt.Errorf("the emulator exited (%v)", cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("the emulator does not listen on %s and %s", invoke, runtime)
		}
	}
	l.rie, l.exited = cmd, exited
	l.url = "http://127.0.0.1:" + invoke + "/2015-03-31/functions/function/invocations"
	l.s.logf("started the Runtime Interface Emulator (pid %d) with the bootstrap", cmd.Process.Pid)
	return nil
}

// Write collects the emulator's and the function's output.
func (l *lambdaPhase) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.log.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		if ln, ok := ParseLine(l.partial[:i]); ok && Relevant(ln.Msg) {
			l.logLines = append(l.logLines, ln)
		}
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

// loop runs the event source's rounds until stop.
func (l *lambdaPhase) loop(src *lambdaadaptertest.EventSource, fn lambdaadaptertest.Function) {
	defer close(l.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.stopc:
			cancel()
		case <-ctx.Done():
		}
	}()
	lastLog := time.Time{}
	for ctx.Err() == nil {
		st, err := src.Round(ctx, l.observe(fn))
		if err != nil && ctx.Err() == nil {
			l.mu.Lock()
			l.roundErrs++
			l.lastErr = err.Error()
			l.mu.Unlock()
			if time.Since(lastLog) > 5*time.Second {
				lastLog = time.Now()
				l.s.logf("Lambda event source: a round failed (retried): %v", err)
			}
		}
		if st.Invocations == 0 || err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// observe wraps fn: it records each Kinesis invocation's shard, batch,
// response and error.
func (l *lambdaPhase) observe(fn lambdaadaptertest.Function) lambdaadaptertest.Function {
	return func(ctx context.Context, payload []byte) ([]byte, error) {
		var ev events.KinesisEvent
		_ = json.Unmarshal(payload, &ev)
		inv := Invocation{Start: time.Now()}
		if len(ev.Records) > 0 && ev.Records[0].EventSource == "aws:kinesis" {
			inv.Shard, _, _ = strings.Cut(ev.Records[0].EventID, ":")
			inv.FirstSeq = ev.Records[0].Kinesis.SequenceNumber
			inv.LastSeq = ev.Records[len(ev.Records)-1].Kinesis.SequenceNumber
		}
		resp, err := fn(ctx, payload)
		inv.End = time.Now()
		if inv.Shard == "" {
			return resp, err
		}
		if err != nil {
			inv.Err = err.Error()
		} else {
			var r events.KinesisEventResponse
			if json.Unmarshal(resp, &r) != nil {
				inv.Err = "unreadable response: " + string(resp)
			}
			for _, f := range r.BatchItemFailures {
				if inv.Reported == "" || seqLess(f.ItemIdentifier, inv.Reported) {
					inv.Reported = f.ItemIdentifier
				}
			}
		}
		l.mu.Lock()
		l.invs = append(l.invs, inv)
		l.mu.Unlock()
		return resp, err
	}
}

// stop ends the event source's loop and the emulator.
func (l *lambdaPhase) stop() {
	select {
	case <-l.stopc:
	default:
		close(l.stopc)
	}
	<-l.done
	l.kill()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.s.logf("Lambda event source: %d invocations of Kinesis batches, %d rounds failed (last: %s)", len(l.invs), l.roundErrs, l.lastErr)
}

// kill ends the function process the emulator started, then the emulator
// (the function has a process group of its own: it is found in /proc).
func (l *lambdaPhase) kill() {
	if l.rie == nil {
		return
	}
	select {
	case <-l.exited:
		return
	default:
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", l.rie.Process.Pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(s); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = l.rie.Process.Kill()
	<-l.exited
	_ = l.log.Close()
}

func (l *lambdaPhase) process() *Process {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &Process{Name: procFunction, Mode: ModeLambda, Lines: slices.Clone(l.logLines)}
}

func (l *lambdaPhase) lines() []Line {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.logLines)
}

func (l *lambdaPhase) invocations() []Invocation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.invs)
}
