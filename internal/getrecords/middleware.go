package getrecords

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go/middleware"
	"github.com/aws/smithy-go/tracing"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Fast is a per-call option of (*kinesis.Client).GetRecords that decodes a
// 200 answer with Decode, and hands every other answer, and every body Decode
// does not accept, to the SDK's own deserializer:
//
//	out, err := client.GetRecords(ctx, in, getrecords.Fast)
//
// It changes nothing when passed to another operation, or when the stack has
// no "OperationDeserializer" (another SDK version). It is safe for
// concurrent use; cancelling the call's context works as without it.
func Fast(o *kinesis.Options) {
	o.APIOptions = append(o.APIOptions, wrapDeserializer)
}

// sdkDeserializerID is the ID of the operation's deserializer in the
// Deserialize step, in every aws-sdk-go-v2 service client.
const sdkDeserializerID = "OperationDeserializer"

// wrapDeserializer puts the fast deserializer in place of the SDK's, which
// it keeps for everything it does not decode itself. The stack's middleware
// order (retries, signing, logging, interceptors around the deserializer)
// stays as it is.
func wrapDeserializer(stack *middleware.Stack) error {
	if stack.ID() != "GetRecords" {
		return nil
	}
	sdk, ok := stack.Deserialize.Get(sdkDeserializerID)
	if !ok {
		return nil
	}
	if _, ok := sdk.(*deserializer); ok {
		return nil // Fast given twice
	}
	_, err := stack.Deserialize.Swap(sdkDeserializerID, &deserializer{sdk: sdk})
	return err
}

// deserializer decodes 200 answers of GetRecords with Decode and passes the
// rest to the SDK's deserializer.
type deserializer struct {
	sdk middleware.DeserializeMiddleware
}

// ID keeps the SDK's ID, so middleware placed relative to it stays in place.
func (m *deserializer) ID() string { return sdkDeserializerID }

func (m *deserializer) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleDeserialize(ctx, in)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil || !ok || resp.StatusCode != 200 || resp.Body == nil {
		return m.sdk.HandleDeserialize(ctx, in, done{out, md, err})
	}

	_, span := tracing.StartSpan(ctx, sdkDeserializerID)
	buf, rerr := readBody(resp.Body, resp.ContentLength)
	if rerr == nil {
		if res, data, ok := decode(*buf); ok {
			span.End()
			putBuffer(buf)
			// The body is at EOF: this closes it as the SDK would.
			smithyhttp.CloseResponseBody(ctx, resp, false, nil)
			out.Result = res
			if data != nil {
				md.Set(dataKey{}, data) // the SDK makes md the answer's ResultMetadata: DataOf
			}
			return out, md, nil
		}
	}
	span.End()
	// The SDK reads the same bytes (and the same read error, if any). The
	// buffer is not reused: nothing says the SDK is done with it.
	resp.Body = &replayBody{r: bytes.NewReader(*buf), err: rerr, body: resp.Body}
	return m.sdk.HandleDeserialize(ctx, in, done{out, md, nil})
}

// done is the rest of the stack, already run: it returns its result again.
type done struct {
	out middleware.DeserializeOutput
	md  middleware.Metadata
	err error
}

func (d done) HandleDeserialize(context.Context, middleware.DeserializeInput) (middleware.DeserializeOutput, middleware.Metadata, error) {
	return d.out, d.md, d.err
}

// replayBody gives the SDK the bytes already read from body, then the error
// that ended the reading (none: EOF); closing it closes body.
type replayBody struct {
	r    *bytes.Reader
	err  error
	body io.ReadCloser
}

func (b *replayBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (b *replayBody) Close() error { return b.body.Close() }

// Body buffers are pooled: a buffer is given back once Decode copied what
// it needs out of it.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

const (
	// maxPresize bounds the buffer allocated up front from a Content-Length
	// (GetRecords answers are at most 10 MiB); a larger body grows as read.
	maxPresize = 32 << 20
	// maxPooled is the largest buffer given back to the pool.
	maxPooled = 16 << 20
	// minRead is the room kept free for each read.
	minRead = 4096
)

// readBody reads r to its end into a pooled buffer, allocated at once from
// size (the Content-Length; -1 when unknown) when the pooled one is too
// small. It returns the buffer even with an error: the bytes read so far.
func readBody(r io.Reader, size int64) (*[]byte, error) {
	bp := buffers.Get().(*[]byte)
	b := (*bp)[:0]
	if size >= 0 && size < maxPresize && int64(cap(b)) <= size {
		b = make([]byte, 0, size+1) // +1: the read that sees EOF needs no growth
	}
	for {
		if len(b) == cap(b) {
			b = append(b, make([]byte, max(minRead, cap(b)))...)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			*bp = b
			if err == io.EOF {
				return bp, nil
			}
			return bp, err
		}
	}
}

func putBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooled {
		buffers.Put(bp)
	}
}
