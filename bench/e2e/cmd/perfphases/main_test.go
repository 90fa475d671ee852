package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A benchmark output with two plain-loop runs and one consumer run, and a
// perf script output with samples of them, of another process and of the
// runtime.
const benchOut = `some table line
{"bench":"lambdaadapter long-running mode end to end","results":[{"phase":"plain","round":1,"pid":101},{"phase":"memory","round":1,"pid":102},{"phase":"plain","round":2,"pid":103}],"concurrent_results":[[{"phase":"plain","pid":104}]]}
`

const perfOut = `101 
	ffffffff82240c89 pvm_irq_enable ([kernel.kallsyms])
	          4a1b2c github.com/aws/smithy-go/transport/http/protocol/internal/json.(*ShapeDeserializer).ReadBlob (/x/bench)
	          4a1b2d github.com/aws/aws-sdk-go-v2/service/kinesis.(*deserializeResponseMiddleware).HandleDeserialize (/x/bench)

101 
	          4a0002 github.com/aws/smithy-go/time.ParseEpochSeconds (/x/bench)
	          4a0003 github.com/aws/aws-sdk-go-v2/service/kinesis.deserializeRecordList.func1 (/x/bench)
	          4a0004 github.com/aws/aws-sdk-go-v2/service/kinesis.(*deserializeResponseMiddleware).HandleDeserialize (/x/bench)

101 
	          4a0005 github.com/aws/aws-sdk-go-v2/aws/signer/v4.(*Signer).SignHTTP (/x/bench)
	          4a0006 github.com/aws/aws-sdk-go-v2/service/kinesis.(*Client).GetRecords (/x/bench)
	          4a0007 main.readShard (/x/bench)

103 
	          4a1b2c github.com/aws/smithy-go/transport/http/protocol/internal/json.(*ShapeDeserializer).ReadBlob (/x/bench)
	          4a1b2d github.com/aws/smithy-go/transport/http/protocol/awsjson.(*Protocol).DeserializeResponse (/x/bench)

103 
	          4a0010 github.com/aws/smithy-go/transport/http/protocol/awsjson.(*Protocol).SerializeRequest (/x/bench)
	          4a0011 github.com/aws/aws-sdk-go-v2/service/kinesis.(*serializeRequestMiddleware).HandleSerialize (/x/bench)

103 
	          4a0000 runtime.mallocgc (/x/bench)
	          4a0001 net/http.(*persistConn).readLoop (/x/bench)

102 
	          4b0000 runtime.memclrNoHeapPointers (/x/bench)
	          4b0001 runtime.mallocgc (/x/bench)
	          4b0002 github.com/shardsettle/lambdaadapter/consumer.(*shard).message (/x/bench)
	          4b0003 github.com/shardsettle/lambdaadapter/consumer.(*shard).register (/x/bench)
	          4b0004 github.com/shardsettle/lambdaadapter/consumer.(*shard).read (/x/bench)

102 
	ffffffff82240c89 pvm_irq_enable ([kernel.kallsyms])
	ffffffff82241156 exc_page_fault ([kernel.kallsyms])
	ffffffff81000c82 asm_exc_page_fault ([kernel.kallsyms])
	          4b0010 github.com/shardsettle/lambdaadapter/consumer.(*shard).message (/x/bench)

102 
	ffffffff82241156 exc_page_fault ([kernel.kallsyms])
	ffffffff81000c82 asm_exc_page_fault ([kernel.kallsyms])
	          4f0010 runtime.doInit1 (/x/bench)

102 
	          4c0000 runtime.scanobject (/x/bench)
	          4c0001 runtime.gcDrain (/x/bench)
	          4c0002 runtime.gcBgMarkWorker (/x/bench)

102 
	          4d0000 runtime.futex (/x/bench)
	          4d0001 runtime.findRunnable (/x/bench)
	          4d0002 runtime.schedule (/x/bench)
	          4d0003 runtime.mstart (/x/bench)

102 
	          4e0000 github.com/shardsettle/lambdaadapter/settle.(*Watermark).settle (/x/bench)
	          4e0001 github.com/shardsettle/lambdaadapter/internal/engine.(*Shard).settle (/x/bench)

102 
	          4f0003 github.com/aws/smithy-go.(*Schema).AddMember (/x/bench)
	          4f0004 github.com/aws/aws-sdk-go-v2/service/kinesis/internal/schemas.init.0 (/x/bench)
	          4f0005 runtime.doInit1 (/x/bench)
	          4f0006 runtime.main (/x/bench)

102 
	          4f0000 runtime.memmove (/x/bench)
	          4f0001 runtime.copystack (/x/bench)
	          4f0002 runtime.morestack.abi0 (/x/bench)

104 
	          4a1b2c github.com/aws/smithy-go/transport/http/protocol/internal/json.(*ShapeDeserializer).ReadBlob (/x/bench)

999 
	          4f0000 Builtins_JSEntry (/usr/bin/node)
`

func TestPerfPhases(t *testing.T) {
	dir := t.TempDir()
	bench, perf := filepath.Join(dir, "bench.out"), filepath.Join(dir, "perf.txt")
	if err := os.WriteFile(bench, []byte(benchOut), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(perf, []byte(perfOut), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	// 1,000 Hz: a sample is 1 ms; the plain loop ran twice.
	if err := run([]string{"-bench", bench, "-perf", perf, "-hz", "1000"}, &out); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.Fields(line)
		// The numbers are the last two fields; the category is the rest.
		got[strings.Join(f[:len(f)-2], " ")] = f[len(f)-2:]
	}
	want := map[string][]string{
		"ms of CPU per run plain (2)":                          {"memory", "(1)"}, // the header: runs per phase
		"SDK: reading and deserializing answers":               {"1.5", "0.0"},    // 3 samples over 2 runs; the concurrent run's is not counted
		"SDK: middleware, signing, retries":                    {"1.0", "0.0"},    // signing and serializing, not under the deserializer
		"net/http":                                             {"0.5", "0.0"},
		"consumer: registering records (messages, deliveries)": {"0.0", "2.0"},
		"GC: background mark":                                  {"0.0", "1.0"},
		"scheduler: finding work, waking, idling":              {"0.0", "1.0"},
		"watermark (settle)":                                   {"0.0", "1.0"},
		"goroutine stack growth":                               {"0.0", "1.0"},
		"process start":                                        {"0.0", "2.0"},
		"total":                                                {"3.0", "8.0"},
		"total without process start":                          {"3.0", "6.0"},
		"÷ plain, without process start":                       {"1.000", "2.000"},
		// One of the consumer's two page faults is in process start.
		"of which page faults (kernel, first touches of memory)": {"0.0", "1.0"},
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("no row %q in\n%s", k, out.String())
			continue
		}
		if strings.Join(g, " ") != strings.Join(w, " ") {
			t.Errorf("row %q = %v, want %v\n%s", k, g, w, out.String())
		}
	}
	if len(got) != len(want) {
		// Every row is checked: a category no sample has is not printed.
		t.Errorf("%d rows, want %d:\n%s", len(got), len(want), out.String())
	}
}

func TestPerfPhasesErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, bench, perf, want string
	}{
		{"no JSON line", "only a table\n", perfOut, `no {"bench":`},
		{"no pid", `{"bench":"x","results":[{"phase":"plain"}]}` + "\n", perfOut, "has no pid"},
		{"other run", benchOut, "555 \n\tabc runtime.main (/x)\n", "no sample of a phase's worker"},
		{"not perf script", benchOut, "header line\n", "not -F pid,ip,sym,dso"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			err := run([]string{"-bench", write("b", c.bench), "-perf", write("p", c.perf)}, &out)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
}
