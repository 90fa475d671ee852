package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/shardsettle/lambdaadapter/message"
	"github.com/shardsettle/lambdaadapter/publish"
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
	stream := rep.Stream
	if stream == "" {
		stream = r.c.cfg.ReplyStream
	}
	var err error
	switch {
	case stream == "":
		err = message.ErrNoReplyStream
	case r.c.cfg.Publisher == nil:
		err = errors.New("consumer: replies need a Kinesis publisher")
	default:
		_, err = r.c.cfg.Publisher.PutBuffer(ctx, publish.Record{Stream: stream, PartitionKey: rep.PartitionKey, Headers: rep.Headers, Payload: rep.Payload}, &r.buf)
	}
	if err != nil {
		err = fmt.Errorf("consumer: reply to %q for shard %s sequence number %s: %w", stream, m.ShardID, m.SequenceNumber, err)
		if failed == nil {
			r.open[m] = err
		}
	}
	return err
}
