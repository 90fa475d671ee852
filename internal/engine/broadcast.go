package engine

// broadcast wakes every goroutine waiting on it. Its methods are called
// with the owner's lock held; a waiter takes the channel under the lock,
// waits on it without the lock, and, when it stopped waiting for another
// reason (a timer, a context), leaves under the lock again. Nothing is made
// or closed while nobody waits, so wakes that nobody waits for (a
// Lambda-mode Submit readying many keys under one lock) cost nothing.
type broadcast struct {
	ch      chan struct{} // closed at the next wake; nil until someone waits
	waiters int           // goroutines waiting on ch
}

// wait returns the channel the next wake closes and counts the caller as
// waiting on it.
func (b *broadcast) wait() <-chan struct{} {
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	b.waiters++
	return b.ch
}

// leave uncounts a waiter that stopped waiting on ch; after the wake that
// closed ch it does nothing (the wake uncounted it).
func (b *broadcast) leave(ch <-chan struct{}) {
	if ch == b.ch {
		b.waiters--
	}
}

// wake wakes every waiter.
func (b *broadcast) wake() {
	if b.waiters == 0 {
		return
	}
	close(b.ch)
	b.ch, b.waiters = nil, 0
}
