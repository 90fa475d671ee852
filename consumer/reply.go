package consumer

import (
	"context"
	"fmt"
	"sync"

	"github.com/shardsettle/lambdaadapter/message"
)

// replier writes the replies (Message.Reply) of the messages one lane, or
// one batch, is handling: each with one PutRecord, encoded into a buffer
// the replier reuses, one at a time. A message accepts replies from the
// moment its handler is called until it returns; a delivery whose reply
// failed is left unsettled, as in Lambda mode.
type replier struct {
	c    *Consumer
	mu   sync.Mutex
	buf  []byte
	open map[*message.Message]error // handler running → its first reply error
}

func newReplier(c *Consumer) *replier {
	return &replier{c: c, open: map[*message.Message]error{}}
}

// begin opens m for replies.
func (r *replier) begin(m *message.Message) {
	r.mu.Lock()
	r.open[m] = nil
	r.mu.Unlock()
	message.Bind(m, r)
}

// end closes m and returns its first reply error, if any.
func (r *replier) end(m *message.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.open[m]
	delete(r.open, m)
	return err
}

// Reply implements message.Replier.
func (r *replier) Reply(ctx context.Context, m *message.Message, rep message.Reply) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	failed, open := r.open[m]
	if !open {
		return message.ErrReplyAfterReturn
	}
	err := r.c.cfg.Publisher.PutReply(ctx, m, rep, r.c.cfg.ReplyStream, &r.buf)
	if err != nil {
		err = fmt.Errorf("consumer: %w", err)
		if failed == nil {
			r.open[m] = err
		}
	}
	return err
}
