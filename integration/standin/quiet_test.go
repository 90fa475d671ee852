package standin

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// poll is one poll of a source as a quietWindow sees it: it takes took and
// finds the source drained or not.
type poll struct {
	took    time.Duration
	drained bool
}

// TestQuietWindow drives a quietWindow as ReadAll and ReceiveAll do (pause,
// poll, report) and checks it against what it promises: it is over only
// after a drained poll that started at least the window after the quiet
// began (the end of the first drained poll since the last arrival), and
// then at the first such poll.
func TestQuietWindow(t *testing.T) {
	const (
		window = 300 * time.Millisecond
		fast   = 10 * time.Millisecond
	)
	for _, tc := range []struct {
		name   string
		window time.Duration
		polls  []poll
		// wantOver tells whether the window ends within the polls.
		wantOver bool
	}{
		{"drained at once", window, repeat(poll{fast, true}, 40), true},
		{"slow reading to the tip does not count", window, append(repeat(poll{5 * time.Second, false}, 3), repeat(poll{fast, true}, 40)...), true},
		{"an arrival restarts the window", window, append(append(repeat(poll{fast, true}, 20), poll{fast, false}), repeat(poll{fast, true}, 40)...), true},
		{"arrivals keep coming", window, repeat(poll{fast, false}, 200), false},
		{"drained only now and then", window, cycle(append(repeat(poll{fast, true}, 5), poll{fast, false}), 30), false},
		{"slow polls inside the window", window, repeat(poll{time.Second, true}, 3), true},
		{"zero window", 0, repeat(poll{fast, true}, 2), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := tc.window
				q := quietWindow{window: w}
				var quietSince time.Time // the oracle's own bookkeeping
				for i, p := range tc.polls {
					time.Sleep(q.pause())
					start := time.Now()
					time.Sleep(p.took)
					firstDrained := p.drained && quietSince.IsZero()
					switch {
					case !p.drained:
						quietSince = time.Time{}
					case firstDrained:
						quietSince = time.Now()
					}
					over := q.polled(start, p.drained)
					want := p.drained && !firstDrained && start.Sub(quietSince) >= w
					if over != want {
						t.Fatalf("poll %d (started %v after the quiet began, drained %v): over = %v, want %v",
							i, start.Sub(quietSince), p.drained, over, want)
					}
					if over {
						if !tc.wantOver {
							t.Fatalf("window over after poll %d, want it never over", i)
						}
						// No needless waiting: the deciding poll began
						// right when the window ended, or one poll later.
						if late := start.Sub(quietSince) - w; late > p.took {
							t.Errorf("deciding poll began %v after the window ended", late)
						}
						return
					}
				}
				if tc.wantOver {
					t.Fatalf("window never over in %d polls", len(tc.polls))
				}
			})
		})
	}
}

func TestQuietWindowPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := quietWindow{window: 50 * time.Millisecond}
		if got := q.pause(); got != pollInterval {
			t.Errorf("pause before the window started = %v, want %v", got, pollInterval)
		}
		if got := q.left(); got != q.window {
			t.Errorf("left before the window started = %v, want %v", got, q.window)
		}
		q.polled(time.Now(), true)
		time.Sleep(40 * time.Millisecond)
		if got := q.pause(); got != 10*time.Millisecond {
			t.Errorf("pause 10ms before the window ends = %v, want 10ms", got)
		}
		time.Sleep(time.Second)
		if got, left := q.pause(), q.left(); got != 0 || left != 0 {
			t.Errorf("after the window: pause = %v, left = %v, want 0, 0", got, left)
		}
	})
}

func TestReadCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		parent, cancelParent := context.WithCancel(t.Context())
		ctx, cancel := withReadCap(parent, time.Second)
		defer cancel()
		start := time.Now()
		<-ctx.Done()
		if got := time.Since(start); got != time.Second+readCap {
			t.Errorf("cap after %v, want %v", got, time.Second+readCap)
		}
		if !capped(ctx) || !errors.Is(context.Cause(ctx), errReadCap) {
			t.Errorf("capped = false, cause = %v; want the cap", context.Cause(ctx))
		}

		ctx2, cancel2 := withReadCap(parent, time.Second)
		defer cancel2()
		cancelParent()
		if capped(ctx2) {
			t.Error("capped = true after the caller's context was canceled")
		}
	})
}

// cycle returns ps repeated n times.
func cycle(ps []poll, n int) []poll {
	var s []poll
	for range n {
		s = append(s, ps...)
	}
	return s
}

// repeat returns n copies of p.
func repeat(p poll, n int) []poll {
	s := make([]poll, n)
	for i := range s {
		s[i] = p
	}
	return s
}
