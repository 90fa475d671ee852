package scalesim

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var (
	full       = flag.Bool("scalesim.full", false, "run TestFullFleetVirtual: 1,000 shards and 50 workers in virtual time (make bench-scale)")
	benchLease = flag.Duration("scalesim.lease", 3*time.Second, "the lease duration of BenchmarkFleet (real time)")
)

// small is the simulation go test runs: 100 shards, 5 workers, a join, a
// graceful leave and a kill.
func small() Config {
	return Config{
		Shards: 100, Workers: 5, WriteRate: 200,
		Events: []Event{{Kind: Join, N: 1}, {Kind: Leave, N: 1}, {Kind: Kill, N: 1}},
		Seed:   1,
	}
}

// fleet is the simulation make bench-scale runs: 1,000 shards, 50 workers,
// 2,000 records a second (2 per shard: every shard's checkpoint moves in
// every checkpoint interval, the most checkpoint writes there can be), one
// and five workers joining, leaving and dying.
func fleet() Config {
	return Config{
		Shards: 1000, Workers: 50, WriteRate: 2000,
		Events: []Event{
			{Kind: Join, N: 1}, {Kind: Leave, N: 1}, {Kind: Kill, N: 1}, {Kind: Join, N: 1},
			{Kind: Kill, N: 5}, {Kind: Join, N: 5}, {Kind: Leave, N: 5},
		},
		Seed: 1,
	}
}

// TestSmallFleet runs the small simulation with the consumer's default
// durations in virtual time (a synctest bubble, so a loaded machine changes
// nothing but how long it takes): every phase converges within 30 lease
// durations, every record written is handled, only a kill re-delivers
// records (planned moves and graceful leaves hand over after the last
// checkpoint), and the steady state writes the lease table no more often
// than the renewal and checkpoint intervals allow.
func TestSmallFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := small()
		cfg.Progress = func(line string) { t.Log(line) }
		rep, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := rep.Format(&b); err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + b.String())
		checkReport(t, rep)
		for _, p := range rep.Phases {
			if p.Kind != Kill && p.Duplicates != 0 {
				t.Errorf("%s: %d records handled twice; only a kill may re-deliver", p.Name, p.Duplicates)
			}
		}
		st := rep.Steady
		// Renewal every third of the lease duration; at most one checkpoint
		// per shard per checkpoint interval (plus one at the window's edge).
		renewals := st.PerShardSecond(st.Store.Calls[Renew])
		if want := 3 / rep.Config.LeaseDuration.Seconds(); renewals < 0.9*want || renewals > 1.1*want {
			t.Errorf("%.3f renewals per shard per second in the steady state, want about %.3f", renewals, want)
		}
		maxCheckpoints := float64(st.Shards) * (st.Window.Seconds()/rep.Config.CheckpointInterval.Seconds() + 1)
		if n := float64(st.Store.Calls[Checkpoint]); n > maxCheckpoints {
			t.Errorf("%.0f checkpoints in the %s steady window, want at most %.0f", n, st.Window, maxCheckpoints)
		}
		if n := st.Store.Calls[Take] + st.Store.Calls[Transfer] + st.Store.Calls[Release]; n != 0 {
			t.Errorf("%d takes, transfers and releases in the steady state, want none", n)
		}
	})
}

// checkReport asserts what every simulation must show: every phase
// converged, records were written, and none was lost.
func checkReport(t testing.TB, rep *Report) {
	t.Helper()
	if len(rep.Phases) != len(rep.Config.Events)+1 {
		t.Fatalf("%d phases, want %d", len(rep.Phases), len(rep.Config.Events)+1)
	}
	for _, p := range rep.Phases {
		if !p.Converged {
			t.Errorf("%s: not converged within %s", p.Name, rep.Config.ConvergeTimeout)
		}
	}
	if rep.Written == 0 {
		t.Error("no record written")
	}
	if rep.Lost != 0 {
		t.Errorf("%d of %d records lost (never handled)", rep.Lost, rep.Written)
	}
}

// TestFullFleetVirtual runs the 1,000-shard, 50-worker simulation with the
// consumer's default durations in virtual time: the times of the lease
// protocol alone, whatever the machine's load. It runs only with
// -scalesim.full (make bench-scale).
func TestFullFleetVirtual(t *testing.T) {
	if !*full {
		t.Skip("run with -scalesim.full (make bench-scale)")
	}
	synctest.Test(t, func(t *testing.T) {
		began := time.Now()
		cfg := fleet()
		cfg.Progress = func(line string) { fmt.Printf("%7.1fs %s\n", time.Since(began).Seconds(), line) }
		fmt.Println("== scale simulation, virtual time (testing/synctest): default durations")
		rep, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.Format(os.Stdout); err != nil {
			t.Fatal(err)
		}
		checkReport(t, rep)
	})
}

// BenchmarkFleet runs the 1,000-shard, 50-worker simulation in real time,
// with the lease duration of -scalesim.lease (3s by default; the other
// durations are the consumer's defaults), and prints its tables. Run it
// with -benchtime=1x (make bench-scale): one run takes minutes.
func BenchmarkFleet(b *testing.B) {
	cfg := fleet()
	cfg.LeaseDuration = *benchLease
	began := time.Now()
	cfg.Progress = func(line string) { fmt.Printf("%7.1fs %s\n", time.Since(began).Seconds(), line) }
	fmt.Printf("== scale simulation, real time: lease duration %s\n", cfg.LeaseDuration)
	var rep *Report
	for b.Loop() {
		var err error
		if rep, err = Run(b.Context(), cfg); err != nil {
			b.Fatal(err)
		}
	}
	if err := rep.Format(os.Stdout); err != nil {
		b.Fatal(err)
	}
	checkReport(b, rep)
	var worst time.Duration
	for _, p := range rep.Phases {
		worst = max(worst, p.Reading)
	}
	b.ReportMetric(worst.Seconds(), "s-worst-converge")
	b.ReportMetric(rep.Steady.PerShardSecond(rep.Steady.Store.Writes()), "writes/shard/s")
	b.ReportMetric(float64(rep.Lost), "lost")
	b.ReportMetric(float64(rep.Duplicates), "duplicates")
}
