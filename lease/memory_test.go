package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/lease/leasetest"
)

func TestMemory(t *testing.T) {
	leasetest.TestStore(t, func(t *testing.T) lease.Store { return lease.NewMemory() })
}

// TestMemoryConcurrentWorkers lets workers compete for the leases of two
// streams with every kind of call at once (run it with -race). Each
// successful write must bump its lease's counter by exactly one: no write is
// lost and none is applied twice.
func TestMemoryConcurrentWorkers(t *testing.T) {
	const (
		workers = 8
		rounds  = 200
		shards  = 4
	)
	ctx := t.Context()
	m := lease.NewMemory()
	streams := []string{"orders", "payments"}
	var wrote sync.Map // lease.Key -> *atomic.Int64: successful writes
	for _, s := range streams {
		for i := range shards {
			k := lease.Key{Stream: s, ShardID: fmt.Sprintf("shardId-%d", i)}
			if _, err := m.Ensure(ctx, k, nil); err != nil {
				t.Fatal(err)
			}
			wrote.Store(k, new(atomic.Int64))
		}
	}
	count := func(k lease.Key) { v, _ := wrote.Load(k); v.(*atomic.Int64).Add(1) }

	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			me := fmt.Sprintf("w%d", w)
			for r := range rounds {
				ls, err := m.List(ctx, streams[r%len(streams)])
				if err != nil {
					errs <- err
					return
				}
				for _, l := range ls {
					var err error
					switch {
					case l.Owner != me && (l.Owner == "" || r%7 == w%7): // take free, steal some
						_, err = m.Take(ctx, l, me)
					case l.Owner == me && r%5 == 0:
						_, err = m.Release(ctx, l)
					case l.Owner == me && r%2 == 0:
						_, err = m.Checkpoint(ctx, l, fmt.Sprint(r))
					case l.Owner == me:
						_, err = m.Renew(ctx, l)
					default:
						_, err = m.Get(ctx, l.Key)
						continue
					}
					switch {
					case err == nil:
						count(l.Key)
					case !errors.Is(err, lease.ErrLeaseLost):
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, s := range streams {
		ls, err := m.List(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != shards {
			t.Fatalf("List(%q) returned %d leases, want %d", s, len(ls), shards)
		}
		for _, l := range ls {
			v, _ := wrote.Load(l.Key)
			if n := v.(*atomic.Int64).Load(); l.Counter != n || n == 0 {
				t.Errorf("%v: counter %d after %d successful writes", l.Key, l.Counter, n)
			}
		}
	}
}
