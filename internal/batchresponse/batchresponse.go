// Package batchresponse turns per-shard watermarks into the partial batch
// response that AWS Lambda reads back from a Kinesis (or SQS) function:
//
//	{"batchItemFailures":[{"itemIdentifier":"<sequence number>"}]}
//
// Lambda checkpoints a shard just before the reported record and delivers it
// again with everything after it, so the response names exactly one record
// per shard: the oldest one that is not settled. When every record settled
// the list is empty and Lambda checkpoints past the whole batch.
//
// A real Lambda batch holds records of one shard. Test and replay events may
// mix shards; for those the response names the first unsettled record of each
// shard that has one, in the order the shards first appear in the batch
// (Lambda itself would act on the lowest one only).
//
// The package is pure: no I/O, no goroutines, no AWS SDK.
package batchresponse

import (
	"unicode/utf8"

	"github.com/shardsettle/lambdaadapter/internal/settle"
)

// Failures returns the item identifiers to report for the given shards, in
// the order given: for each watermark with an unsettled delivery, the sequence
// number of its oldest unsettled delivery. It never returns an empty
// identifier nor a sequence number that was not delivered to the watermark.
// The result is nil when every delivery of every shard settled.
func Failures(shards []*settle.Watermark) []string {
	var ids []string
	for _, w := range shards {
		if seq, ok := w.FirstUnsettled(); ok {
			ids = append(ids, seq)
		}
	}
	return ids
}

// AppendJSON appends the JSON partial batch response for ids to dst and
// returns the extended buffer. No ids encode as {"batchItemFailures":[]}
// (never null), which Lambda reads as "all records succeeded".
func AppendJSON(dst []byte, ids []string) []byte {
	dst = append(dst, `{"batchItemFailures":[`...)
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"itemIdentifier":`...)
		dst = appendString(dst, id)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// appendString appends s as a JSON string. Sequence numbers are digits, but
// SQS message ids are opaque, so escape properly.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, `\u00`...)
			dst = append(dst, hex[c>>4], hex[c&0xF])
		}
		i++
	}
	return append(dst, '"')
}

const hex = "0123456789abcdef"
