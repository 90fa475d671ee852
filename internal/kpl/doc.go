// Package kpl decodes and encodes the aggregated records of the Kinesis
// Producer Library (KPL): one Kinesis record carrying many user records.
//
// # Format
//
// An aggregated record is
//
//	F3 89 9A C2 | AggregatedRecord (protobuf) | MD5 digest of the protobuf bytes (16 bytes)
//
// where the protobuf message is (proto2, field numbers as the KPL's
// aggregation.proto):
//
//	message AggregatedRecord {
//	  repeated string partition_key_table     = 1;
//	  repeated string explicit_hash_key_table = 2;
//	  repeated Record records                 = 3;
//	}
//	message Record {
//	  required uint64 partition_key_index     = 1;
//	  optional uint64 explicit_hash_key_index = 2;
//	  required bytes  data                    = 3;
//	  repeated Tag    tags                    = 4;
//	}
//	message Tag {
//	  required string key   = 1;
//	  optional string value = 2;
//	}
//
// A user record's partition key and explicit hash key are indexes into the
// tables, so a key shared by many user records is stored once.
//
// # Bad input
//
// Data is an aggregate only when it starts with the magic bytes, is longer
// than the magic plus the digest, and the digest matches. Anything else is
// not an aggregate, and Deaggregate says so without an error: ordinary user
// data may start with the magic bytes, and the KCL and the KPL's own
// deaggregators treat such data as one ordinary record too. In particular
// the magic followed directly by the digest of an empty message (20 bytes)
// is not an aggregate.
//
// An aggregate whose protobuf message is not a valid AggregatedRecord is
// malformed, and Deaggregate returns an error matching ErrMalformed that
// names the problem, the user record (counted from 0) and the byte offset
// in the data. Malformed means: a truncated message (a tag, varint or
// length running past the end), an invalid tag or wire type, a known field
// with the wrong wire type, a user record without partition_key_index or
// without data (required fields), a partition_key_index or
// explicit_hash_key_index out of range of its table, a tag without key, or
// an aggregate with no user records (a non-empty message holding only
// tables or unknown fields). Unknown fields are skipped, as protobuf
// requires; a scalar field repeated within one user record takes its last
// value. Tags are checked but not returned. Keys are not checked for valid
// UTF-8 (proto2 strings are bytes) nor against Kinesis limits.
//
// Deaggregate never panics and allocates a constant number of times per
// call, at most about ten times the input's size even for hostile input.
//
// Usage, for each Kinesis record:
//
//	users, ok, err := kpl.Deaggregate(rec.Data)
//	switch {
//	case err != nil:
//		return err // matches kpl.ErrMalformed
//	case !ok:
//		handle(rec.PartitionKey, rec.Data) // an ordinary record
//	default:
//		for _, u := range users {
//			handle(u.PartitionKey, u.Data)
//		}
//	}
//
// The package is pure: no goroutines, no I/O, no state shared between calls.
package kpl
