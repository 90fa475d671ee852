package awsfake

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kinesistypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/shardsettle/lambdaadapter/envelope"
)

const (
	// account and arnPrefix name the fake's one account and region.
	account   = "123456789012"
	arnPrefix = "arn:aws:kinesis:us-east-1:" + account + ":stream/"

	// iteratorTTL is how long a shard iterator stays valid, as in Kinesis.
	iteratorTTL = 5 * time.Minute
	// tokenTTL is how long a ListShards NextToken stays valid, as in Kinesis.
	tokenTTL = 300 * time.Second
	// maxLimit is the largest (and the default) GetRecords Limit.
	maxLimit = 10000
	// maxPage is the largest (and the default) ListShards page.
	maxPage = 1000
)

// hashSpace is 2^128, the size of the Kinesis hash key space; maxHashKey is
// its largest key.
var (
	hashSpace  = new(big.Int).Lsh(big.NewInt(1), 128)
	maxHashKey = new(big.Int).Sub(hashSpace, big.NewInt(1))
)

// Record is one record placed in a shard of a stream created with
// CreateStream, as Records reports it.
type Record struct {
	// ShardID is the shard that holds the record.
	ShardID string
	// SequenceNumber is the record's sequence number: 56 decimal digits,
	// growing with every record of the stream.
	SequenceNumber string
	// PartitionKey is the key the record was written with.
	PartitionKey string
	// ApproximateArrivalTimestamp is when the stream accepted the record,
	// truncated to the millisecond.
	ApproximateArrivalTimestamp time.Time
	// Data is the record's data as written (with its RSK1 envelope, if any).
	Data []byte
	// Headers and Payload are Data opened, as in Written.
	Headers envelope.Headers
	Payload []byte
}

// stream is a stream created with CreateStream. Its fields are guarded by
// Kinesis.mu.
type stream struct {
	name, arn string
	created   time.Time
	// shards holds every shard ever created, trimmed ones included, indexed
	// by the number in their id.
	shards []*shard
	// n is the last sequence counter the stream used (see seqOf).
	n uint64
}

// shard is one shard of a stream. Its fields are guarded by Kinesis.mu.
type shard struct {
	id, parent, adjacent string
	idx                  int
	lo, hi               *big.Int // the hash key range, both ends included
	startSeq, endSeq     string   // endSeq is empty while the shard is open
	opened, closedAt     time.Time
	trimmed              bool
	records              []stored
}

// stored is one record in a shard.
type stored struct {
	n       uint64 // the sequence counter, which orders records
	seq     string
	key     string
	data    []byte
	arrival time.Time
}

func (s *shard) open() bool { return s.endSeq == "" }

// next takes the stream's next sequence counter.
func (st *stream) next() uint64 {
	st.n++
	return st.n
}

// seqOf formats a sequence number: "49", the stream's sequence counter in 42
// digits, and the shard's number in 12, 56 digits in all. The counter makes
// sequence numbers grow across the stream; the shard's number lets
// GetShardIterator refuse a sequence number from another shard, as Kinesis
// does.
func seqOf(n uint64, idx int) string { return fmt.Sprintf("49%042d%012d", n, idx) }

// parseSeq reverses seqOf.
func parseSeq(s string) (n uint64, idx int, ok bool) {
	if len(s) != 56 || !strings.HasPrefix(s, "49") {
		return 0, 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, 0, false
		}
	}
	n, err := strconv.ParseUint(s[2:44], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	i, err := strconv.Atoi(s[44:])
	if err != nil {
		return 0, 0, false
	}
	return n, i, true
}

func shardID(idx int) string { return fmt.Sprintf("shardId-%012d", idx) }

// newShard adds a shard to st, numbered after every shard it has had.
func (st *stream) newShard(lo, hi *big.Int, parent, adjacent string) *shard {
	idx := len(st.shards)
	s := &shard{id: shardID(idx), idx: idx, parent: parent, adjacent: adjacent, lo: lo, hi: hi, opened: time.Now()}
	s.startSeq = seqOf(st.next(), idx)
	st.shards = append(st.shards, s)
	return s
}

// shard returns the untrimmed shard id, or nil. A shard's id numbers its
// place in st.shards, so the lookup reads that place (streams of a thousand
// shards are read a thousand times a second in simulations).
func (st *stream) shard(id string) *shard {
	num, ok := strings.CutPrefix(id, "shardId-")
	if !ok || len(num) != 12 {
		return nil
	}
	idx, err := strconv.Atoi(num)
	if err != nil || idx < 0 || idx >= len(st.shards) {
		return nil
	}
	if s := st.shards[idx]; s.id == id && !s.trimmed {
		return s
	}
	return nil
}

// close closes s as a split or merge does.
func (st *stream) close(s *shard) {
	s.endSeq = seqOf(st.next(), s.idx)
	s.closedAt = time.Now()
}

// place appends a record to the open shard whose range holds hash.
func (st *stream) place(hash *big.Int, key string, data []byte) (shardID, seq string) {
	for _, s := range st.shards {
		if !s.open() || s.trimmed || hash.Cmp(s.lo) < 0 || hash.Cmp(s.hi) > 0 {
			continue
		}
		return s.id, st.append(s, key, data)
	}
	// The open shards always cover the whole hash key space.
	panic("awsfake: no open shard holds hash key " + hash.String())
}

// append appends a record to the open shard s and returns its sequence
// number.
func (st *stream) append(s *shard, key string, data []byte) (seq string) {
	r := stored{n: st.next(), key: key, data: append([]byte(nil), data...), arrival: time.Now().Truncate(time.Millisecond)}
	r.seq = seqOf(r.n, s.idx)
	s.records = append(s.records, r)
	return r.seq
}

// children returns the shards s was split or merged into.
func (st *stream) children(s *shard) []kinesistypes.ChildShard {
	var out []kinesistypes.ChildShard
	for _, c := range st.shards {
		if c.parent != s.id && c.adjacent != s.id {
			continue
		}
		parents := []string{c.parent}
		if c.adjacent != "" {
			parents = append(parents, c.adjacent)
		}
		out = append(out, kinesistypes.ChildShard{ShardId: aws.String(c.id), ParentShards: parents, HashKeyRange: c.hashKeyRange()})
	}
	return out
}

func (s *shard) hashKeyRange() *kinesistypes.HashKeyRange {
	return &kinesistypes.HashKeyRange{StartingHashKey: aws.String(s.lo.String()), EndingHashKey: aws.String(s.hi.String())}
}

func (s *shard) describe() kinesistypes.Shard {
	out := kinesistypes.Shard{
		ShardId:             aws.String(s.id),
		HashKeyRange:        s.hashKeyRange(),
		SequenceNumberRange: &kinesistypes.SequenceNumberRange{StartingSequenceNumber: aws.String(s.startSeq)},
	}
	if s.parent != "" {
		out.ParentShardId = aws.String(s.parent)
	}
	if s.adjacent != "" {
		out.AdjacentParentShardId = aws.String(s.adjacent)
	}
	if !s.open() {
		out.SequenceNumberRange.EndingSequenceNumber = aws.String(s.endSeq)
	}
	return out
}

func invalidArgument(format string, a ...any) error {
	return &kinesistypes.InvalidArgumentException{Message: aws.String(fmt.Sprintf(format, a...))}
}

func streamNotFound(ref string) error {
	return &kinesistypes.ResourceNotFoundException{Message: aws.String(fmt.Sprintf("Stream %s under account %s not found.", ref, account))}
}

func shardNotFound(id, stream string) error {
	return &kinesistypes.ResourceNotFoundException{Message: aws.String(fmt.Sprintf("Shard %s in stream %s under account %s does not exist", id, stream, account))}
}

// byRef returns the created stream that ref (a name or an ARN) names, or nil.
// The caller holds k.mu.
func (k *Kinesis) byRef(ref string) *stream {
	if name, ok := strings.CutPrefix(ref, arnPrefix); ok {
		return k.streams[name]
	}
	return k.streams[ref]
}

// streamFor resolves the StreamARN and StreamName of a read call. The caller
// holds k.mu.
func (k *Kinesis) streamFor(arn, name *string) (*stream, error) {
	a, n := aws.ToString(arn), aws.ToString(name)
	switch {
	case a != "":
		nm, isARN := strings.CutPrefix(a, arnPrefix)
		st := k.streams[nm]
		if !isARN || st == nil {
			return nil, streamNotFound(a)
		}
		if n != "" && n != st.name {
			return nil, invalidArgument("StreamARN %s and StreamName %s name different streams", a, n)
		}
		return st, nil
	case n != "":
		st, ok := k.streams[n]
		if !ok {
			return nil, streamNotFound(n)
		}
		return st, nil
	default:
		return nil, invalidArgument("either StreamName or StreamARN must be provided")
	}
}

// target resolves the stream a write goes to: nil (and no error) for a
// stream that was never created, which keeps the fake's record-only
// behaviour. The caller holds k.mu.
func (k *Kinesis) target(arn, name *string) (*stream, error) {
	a, n := aws.ToString(arn), aws.ToString(name)
	if a != "" {
		nm, ok := strings.CutPrefix(a, arnPrefix)
		st := k.streams[nm]
		if !ok || st == nil {
			return nil, nil
		}
		if n != "" && n != st.name {
			return nil, invalidArgument("StreamARN %s and StreamName %s name different streams", a, n)
		}
		return st, nil
	}
	return k.streams[n], nil
}

// hashKeyOf validates a record written to a created stream and returns the
// hash key that places it: its ExplicitHashKey, or the MD5 of its partition
// key as a 128-bit big-endian integer.
func hashKeyOf(key string, explicit *string) (*big.Int, error) {
	if n := utf8.RuneCountInString(key); n < 1 || n > 256 {
		return nil, invalidArgument("partition key %q must be 1 to 256 characters long", key)
	}
	if explicit != nil {
		h, ok := new(big.Int).SetString(*explicit, 10)
		if !ok || h.Sign() < 0 || h.Cmp(maxHashKey) > 0 {
			return nil, invalidArgument("Invalid ExplicitHashKey. ExplicitHashKey must be in the range: [0, 2^128-1]. Specified value was %s", *explicit)
		}
		return h, nil
	}
	sum := md5.Sum([]byte(key))
	return new(big.Int).SetBytes(sum[:]), nil
}

// begin starts a read call: it fails at once on a done context (as an SDK
// client does), waits Delay, and counts the call.
func (k *Kinesis) begin(ctx context.Context, api string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := k.wait(ctx); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls[api]++
	return nil
}

// readFail asks ReadFail, without holding k.mu.
func (k *Kinesis) readFail(api, shardID string) error {
	if k.ReadFail == nil {
		return nil
	}
	return k.ReadFail(api, shardID)
}

// iterator is what a shard iterator string carries.
type iterator struct {
	stream, shard string
	pos           int // index of the next record in the shard
	issued        time.Time
}

const iteratorPrefix = "AAAAAAAAAAF" // as real iterators, opaque and recognisable

func (it iterator) String() string {
	raw := fmt.Sprintf("%s|%s|%d|%d", it.stream, it.shard, it.pos, it.issued.UnixNano())
	return iteratorPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func parseIterator(s string) (iterator, error) {
	bad := invalidArgument("invalid ShardIterator %q", s)
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, iteratorPrefix))
	if err != nil || !strings.HasPrefix(s, iteratorPrefix) {
		return iterator{}, bad
	}
	f := strings.Split(string(b), "|")
	if len(f) != 4 {
		return iterator{}, bad
	}
	pos, err1 := strconv.Atoi(f[2])
	ns, err2 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || pos < 0 {
		return iterator{}, bad
	}
	return iterator{stream: f[0], shard: f[1], pos: pos, issued: time.Unix(0, ns)}, nil
}

// listToken is what a ListShards NextToken carries.
type listToken struct {
	stream, after string
	filter        kinesistypes.ShardFilterType
	at            time.Time // the filter's Timestamp, if any
	issued        time.Time
}

const tokenPrefix = "AAAAAAAAAAG"

func (t listToken) String() string {
	raw := fmt.Sprintf("%s|%s|%s|%d|%d", t.stream, t.after, t.filter, t.at.UnixNano(), t.issued.UnixNano())
	return tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func parseListToken(s string) (listToken, error) {
	bad := invalidArgument("invalid NextToken %q", s)
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, tokenPrefix))
	if err != nil || !strings.HasPrefix(s, tokenPrefix) {
		return listToken{}, bad
	}
	f := strings.Split(string(b), "|")
	if len(f) != 5 {
		return listToken{}, bad
	}
	at, err1 := strconv.ParseInt(f[3], 10, 64)
	issued, err2 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil {
		return listToken{}, bad
	}
	return listToken{stream: f[0], after: f[1], filter: kinesistypes.ShardFilterType(f[2]), at: time.Unix(0, at), issued: time.Unix(0, issued)}, nil
}

// validStreamName reports whether name is a Kinesis stream name.
func validStreamName(name string) bool {
	if len(name) < 1 || len(name) > 128 {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// CreateStream creates the stream name with shards open shards,
// shardId-000000000000 onwards, that split the 128-bit hash key space evenly
// as Kinesis does (the last shard takes the remainder), and returns its ARN,
// arn:aws:kinesis:us-east-1:123456789012:stream/<name>. From then on PutRecord
// and PutRecords addressed to the stream (by name or ARN) place what they
// accept in its shards, and the read calls serve it. The stream is ACTIVE at
// once. CreateStream panics if name is not a valid stream name, if the stream
// already exists or if shards is less than 1. It is safe for concurrent use.
func (k *Kinesis) CreateStream(name string, shards int) (arn string) {
	if !validStreamName(name) {
		panic(fmt.Sprintf("awsfake: invalid stream name %q", name))
	}
	if shards < 1 {
		panic(fmt.Sprintf("awsfake: stream %s needs at least one shard, not %d", name, shards))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.streams[name]; ok {
		panic(fmt.Sprintf("awsfake: stream %s already exists", name))
	}
	if k.streams == nil {
		k.streams = map[string]*stream{}
	}
	st := &stream{name: name, arn: arnPrefix + name, created: time.Now()}
	size := new(big.Int).Div(hashSpace, big.NewInt(int64(shards)))
	for i := range shards {
		lo := new(big.Int).Mul(size, big.NewInt(int64(i)))
		hi := new(big.Int).Sub(new(big.Int).Add(lo, size), big.NewInt(1))
		if i == shards-1 {
			hi = new(big.Int).Set(maxHashKey)
		}
		st.newShard(lo, hi, "", "")
	}
	k.streams[name] = st
	return st.arn
}

// mustShard returns the stream and its untrimmed shard for a test helper, or
// panics. The caller holds k.mu.
func (k *Kinesis) mustShard(op, ref, id string) (*stream, *shard) {
	st := k.mustStream(op, ref)
	s := st.shard(id)
	if s == nil {
		panic(fmt.Sprintf("awsfake: %s: stream %s has no shard %s", op, st.name, id))
	}
	return st, s
}

func (k *Kinesis) mustStream(op, ref string) *stream {
	st := k.byRef(ref)
	if st == nil {
		panic(fmt.Sprintf("awsfake: %s: no stream %s (create it with CreateStream)", op, ref))
	}
	return st
}

// Split splits the open shard shardID of stream (a name or an ARN) as
// SplitShard does with a new starting hash key in the middle of its range: it
// closes the shard (it keeps its records and gets an EndingSequenceNumber)
// and adds two open children numbered after the highest shard id the stream
// has had, left taking the lower half of the range and right the upper half.
// Records written afterwards go to the children. The shard stays readable
// until Trim. Split panics for an unknown stream or shard, a closed shard, or
// a shard with a single hash key. It is safe for concurrent use.
func (k *Kinesis) Split(stream, shardID string) (left, right string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, s := k.mustShard("split", stream, shardID)
	if !s.open() {
		panic(fmt.Sprintf("awsfake: split: shard %s of stream %s is closed", shardID, st.name))
	}
	width := new(big.Int).Sub(s.hi, s.lo)
	if width.Sign() == 0 {
		panic(fmt.Sprintf("awsfake: split: shard %s of stream %s has a single hash key", shardID, st.name))
	}
	// mid = lo + (hi-lo+1)/2 starts the right half.
	mid := new(big.Int).Add(s.lo, new(big.Int).Rsh(width.Add(width, big.NewInt(1)), 1))
	st.close(s)
	l := st.newShard(new(big.Int).Set(s.lo), new(big.Int).Sub(mid, big.NewInt(1)), s.id, "")
	r := st.newShard(mid, new(big.Int).Set(s.hi), s.id, "")
	return l.id, r.id
}

// Merge merges the open shards a and b of stream (a name or an ARN), whose
// hash key ranges must be adjacent, as MergeShards does with a as
// ShardToMerge and b as AdjacentShardToMerge: it closes both and adds one
// open child, numbered after the highest shard id the stream has had, with
// ParentShardId a, AdjacentParentShardId b and the union of their ranges.
// Merge panics for an unknown stream or shard, a closed shard, or ranges that
// are not adjacent. It is safe for concurrent use.
func (k *Kinesis) Merge(stream, a, b string) (child string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, sa := k.mustShard("merge", stream, a)
	_, sb := k.mustShard("merge", stream, b)
	if !sa.open() || !sb.open() {
		panic(fmt.Sprintf("awsfake: merge: shards %s and %s of stream %s must both be open", a, b, st.name))
	}
	one := big.NewInt(1)
	var lo, hi *big.Int
	switch {
	case new(big.Int).Add(sa.hi, one).Cmp(sb.lo) == 0:
		lo, hi = sa.lo, sb.hi
	case new(big.Int).Add(sb.hi, one).Cmp(sa.lo) == 0:
		lo, hi = sb.lo, sa.hi
	default:
		panic(fmt.Sprintf("awsfake: merge: shards %s and %s of stream %s are not adjacent", a, b, st.name))
	}
	st.close(sa)
	st.close(sb)
	return st.newShard(new(big.Int).Set(lo), new(big.Int).Set(hi), a, b).id
}

// Trim removes the closed shard shardID of stream (a name or an ARN) and its
// records, as the retention period does once a closed shard's last record
// has expired: ListShards no longer lists it, GetShardIterator and GetRecords
// (even with an iterator obtained before) answer ResourceNotFoundException,
// and Records leaves it out. Its children keep naming it as their parent.
// Trim panics for an unknown stream or shard or an open shard. It is safe for
// concurrent use.
func (k *Kinesis) Trim(stream, shardID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, s := k.mustShard("trim", stream, shardID)
	if s.open() {
		panic(fmt.Sprintf("awsfake: trim: shard %s of stream %s is open", shardID, st.name))
	}
	s.trimmed = true
	s.records = nil
}

// Records returns every record placed in stream (a name or an ARN) and not
// trimmed: shard by shard in shard id order, each shard's records in
// sequence order. The records are copies. Records panics if the stream was
// never created. It is safe for concurrent use.
func (k *Kinesis) Records(stream string) []Record {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.mustStream("records", stream)
	var out []Record
	for _, s := range st.shards {
		if s.trimmed {
			continue
		}
		for _, r := range s.records {
			h, p := envelope.Decode(r.data)
			out = append(out, Record{
				ShardID: s.id, SequenceNumber: r.seq, PartitionKey: r.key, ApproximateArrivalTimestamp: r.arrival,
				Data: append([]byte(nil), r.data...), Headers: h.Clone(), Payload: append([]byte(nil), p...),
			})
		}
	}
	return out
}

// Put places one record with partition key key in stream (a name or an ARN)
// as PutRecord would, and returns its shard and sequence number. It is for
// test set-up: it stands for a producer other than the code under test, so
// it is not counted by Calls, does not appear in Written, and neither Fail
// nor Delay applies to it. Put panics if the stream was never created or the
// key is not 1 to 256 characters long. It is safe for concurrent use.
func (k *Kinesis) Put(stream, key string, data []byte) (shardID, seq string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.mustStream("put", stream)
	h, err := hashKeyOf(key, nil)
	if err != nil {
		panic("awsfake: put: " + err.Error())
	}
	return st.place(h, key, data)
}

// PutTo places one record with partition key key in the open shard shardID
// of stream, whatever the key's hash (as a producer setting ExplicitHashKey
// would), and returns its sequence number. Like Put it is for test set-up:
// not counted by Calls, not in Written, neither Fail nor Delay applies. It
// panics if the stream or an open shard of that id does not exist. It is
// safe for concurrent use.
func (k *Kinesis) PutTo(stream, shardID, key string, data []byte) (seq string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, s := k.mustShard("put to", stream, shardID)
	if !s.open() {
		panic("awsfake: put to: shard " + shardID + " of " + stream + " is closed")
	}
	// The open shards' ranges do not overlap: s is the one place would
	// find for its own lowest hash key.
	return st.append(s, key, data)
}

// ListShards fakes Kinesis ListShards for a stream created with
// CreateStream. It lists every shard not trimmed, open and closed, in shard
// id order, with its hash key range, its sequence number range
// (EndingSequenceNumber for a closed shard) and its parents. It takes the
// stream by StreamName or StreamARN, or a NextToken alone (with StreamARN
// allowed if it matches); ExclusiveStartShardId; MaxResults (1 to 10000,
// default 1000, at most 1000 returned), further capped by ListPageSize; and
// ShardFilter (AFTER_SHARD_ID, AT_TRIM_HORIZON, FROM_TRIM_HORIZON, AT_LATEST,
// AT_TIMESTAMP, FROM_TIMESTAMP). A NextToken expires after 300 seconds
// (ExpiredNextTokenException). An unknown stream answers
// ResourceNotFoundException, a bad argument InvalidArgumentException. A done
// context fails the call at once; Delay applies. ReadFail does not. It is
// safe for concurrent use.
func (k *Kinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if err := k.begin(ctx, "ListShards"); err != nil {
		return nil, err
	}
	page := maxPage
	if in.MaxResults != nil {
		if m := int(*in.MaxResults); m < 1 || m > maxLimit {
			return nil, invalidArgument("MaxResults %d is not between 1 and %d", m, maxLimit)
		} else if m < page {
			page = m
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ListPageSize > 0 && k.ListPageSize < page {
		page = k.ListPageSize
	}
	var (
		q  listToken
		st *stream
	)
	if in.NextToken != nil {
		if in.StreamName != nil || in.ExclusiveStartShardId != nil || in.StreamCreationTimestamp != nil || in.ShardFilter != nil {
			return nil, invalidArgument("NextToken cannot be provided together with StreamName, ExclusiveStartShardId, StreamCreationTimestamp or ShardFilter")
		}
		var err error
		if q, err = parseListToken(*in.NextToken); err != nil {
			return nil, err
		}
		if time.Since(q.issued) > tokenTTL {
			return nil, &kinesistypes.ExpiredNextTokenException{Message: aws.String("The timestamp of the nextToken has expired")}
		}
		if st = k.streams[q.stream]; st == nil {
			return nil, invalidArgument("invalid NextToken %q", *in.NextToken)
		}
		if a := aws.ToString(in.StreamARN); a != "" && a != st.arn {
			return nil, invalidArgument("NextToken does not belong to stream %s", a)
		}
	} else {
		var err error
		if st, err = k.streamFor(in.StreamARN, in.StreamName); err != nil {
			return nil, err
		}
		q = listToken{stream: st.name, after: aws.ToString(in.ExclusiveStartShardId)}
		if f := in.ShardFilter; f != nil {
			q.filter = f.Type
			switch f.Type {
			case kinesistypes.ShardFilterTypeAfterShardId:
				if f.ShardId == nil {
					return nil, invalidArgument("ShardFilter AFTER_SHARD_ID needs a ShardId")
				}
				q.after = max(q.after, *f.ShardId)
			case kinesistypes.ShardFilterTypeAtTimestamp, kinesistypes.ShardFilterTypeFromTimestamp:
				if f.Timestamp == nil {
					return nil, invalidArgument("ShardFilter %s needs a Timestamp", f.Type)
				}
				q.at = *f.Timestamp
			case kinesistypes.ShardFilterTypeAtTrimHorizon, kinesistypes.ShardFilterTypeFromTrimHorizon, kinesistypes.ShardFilterTypeAtLatest:
			default:
				return nil, invalidArgument("unknown ShardFilter type %q", f.Type)
			}
		}
	}
	out := &kinesis.ListShardsOutput{Shards: []kinesistypes.Shard{}}
	for _, s := range st.shards {
		if s.trimmed || s.id <= q.after || !st.matches(s, q) {
			continue
		}
		if len(out.Shards) == page {
			q.after = aws.ToString(out.Shards[page-1].ShardId)
			q.issued = time.Now()
			out.NextToken = aws.String(q.String())
			break
		}
		out.Shards = append(out.Shards, s.describe())
	}
	return out, nil
}

// matches reports whether s passes the ShardFilter of q.
func (st *stream) matches(s *shard, q listToken) bool {
	atHorizon := func() bool {
		for _, p := range []string{s.parent, s.adjacent} {
			if p != "" && st.shard(p) != nil {
				return false
			}
		}
		return true
	}
	switch q.filter {
	case kinesistypes.ShardFilterTypeAtTrimHorizon:
		return atHorizon()
	case kinesistypes.ShardFilterTypeAtLatest:
		return s.open()
	case kinesistypes.ShardFilterTypeAtTimestamp:
		if q.at.Before(st.created) {
			return atHorizon()
		}
		return !s.opened.After(q.at) && (s.open() || s.closedAt.After(q.at))
	case kinesistypes.ShardFilterTypeFromTimestamp:
		return q.at.Before(st.created) || s.open() || s.closedAt.After(q.at)
	default:
		return true
	}
}

// GetShardIterator fakes Kinesis GetShardIterator for a stream created with
// CreateStream (by StreamName or StreamARN) and one of its shards, open or
// closed but not trimmed. It supports every iterator type: TRIM_HORIZON (the
// shard's first record), LATEST (just after its last record at the time of
// the call), AT_SEQUENCE_NUMBER and AFTER_SEQUENCE_NUMBER (StartingSequenceNumber
// must be one of this shard's, such as a record's or the shard's
// StartingSequenceNumber; it need not be a record's), and AT_TIMESTAMP (the
// first record that arrived at or after Timestamp, or the tip). The iterator
// is an opaque string valid for 5 minutes. ReadFail is asked first (with api
// "GetShardIterator"); then an unknown stream or shard answers
// ResourceNotFoundException and a bad argument InvalidArgumentException. A
// done context fails the call at once; Delay applies. It is safe for
// concurrent use.
func (k *Kinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if err := k.begin(ctx, "GetShardIterator"); err != nil {
		return nil, err
	}
	id := aws.ToString(in.ShardId)
	if id == "" {
		return nil, invalidArgument("ShardId must be provided")
	}
	if err := k.readFail("GetShardIterator", id); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	st, err := k.streamFor(in.StreamARN, in.StreamName)
	if err != nil {
		return nil, err
	}
	s := st.shard(id)
	if s == nil {
		return nil, shardNotFound(id, st.name)
	}
	var pos int
	switch t := in.ShardIteratorType; t {
	case kinesistypes.ShardIteratorTypeTrimHorizon:
	case kinesistypes.ShardIteratorTypeLatest:
		pos = len(s.records)
	case kinesistypes.ShardIteratorTypeAtSequenceNumber, kinesistypes.ShardIteratorTypeAfterSequenceNumber:
		seq := aws.ToString(in.StartingSequenceNumber)
		if seq == "" {
			return nil, invalidArgument("StartingSequenceNumber must be provided for %s", t)
		}
		n, idx, ok := parseSeq(seq)
		if !ok || idx != s.idx {
			return nil, invalidArgument("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid because it did not come from this stream", seq, id, st.name, account)
		}
		after := t == kinesistypes.ShardIteratorTypeAfterSequenceNumber
		pos = sort.Search(len(s.records), func(i int) bool {
			return s.records[i].n > n || !after && s.records[i].n == n
		})
	case kinesistypes.ShardIteratorTypeAtTimestamp:
		if in.Timestamp == nil {
			return nil, invalidArgument("Timestamp must be provided for AT_TIMESTAMP")
		}
		pos = slices.IndexFunc(s.records, func(r stored) bool { return !r.arrival.Before(*in.Timestamp) })
		if pos < 0 {
			pos = len(s.records)
		}
	default:
		return nil, invalidArgument("unknown ShardIteratorType %q", t)
	}
	it := iterator{stream: st.name, shard: id, pos: pos, issued: time.Now()}
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(it.String())}, nil
}

// GetRecords fakes Kinesis GetRecords. It returns up to Limit (1 to 10000,
// default 10000; no cap on their total size) records from the iterator's
// position, copies of what was written, and a NextShardIterator past them.
// An open shard at its tip answers no records and a NextShardIterator. Once
// the answer reaches the end of a closed shard (possibly together with its
// last records) NextShardIterator is nil and ChildShards lists the shards it
// was split or merged into. MillisBehindLatest is how long the first record
// not yet returned has waited (0 when there is none). ReadFail is asked first
// (with api "GetRecords" and the iterator's shard); then an iterator older
// than 5 minutes answers ExpiredIteratorException, one of a trimmed shard
// ResourceNotFoundException, a malformed iterator, a bad Limit or a
// StreamARN that is not the iterator's InvalidArgumentException. A done
// context fails the call at once; Delay applies. It is safe for concurrent
// use.
func (k *Kinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if err := k.begin(ctx, "GetRecords"); err != nil {
		return nil, err
	}
	it, err := parseIterator(aws.ToString(in.ShardIterator))
	if err != nil {
		return nil, err
	}
	limit := maxLimit
	if in.Limit != nil {
		if limit = int(*in.Limit); limit < 1 || limit > maxLimit {
			return nil, invalidArgument("Limit %d is not between 1 and %d", limit, maxLimit)
		}
	}
	if err := k.readFail("GetRecords", it.shard); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.streams[it.stream]
	if st == nil {
		return nil, streamNotFound(it.stream)
	}
	if a := aws.ToString(in.StreamARN); a != "" && a != st.arn {
		return nil, invalidArgument("ShardIterator does not belong to stream %s", a)
	}
	s := st.shard(it.shard)
	if s == nil {
		return nil, shardNotFound(it.shard, st.name)
	}
	now := time.Now()
	if age := now.Sub(it.issued); age > iteratorTTL {
		return nil, &kinesistypes.ExpiredIteratorException{Message: aws.String(fmt.Sprintf(
			"Iterator expired. The iterator was created at time %s while right now it is %s which is further in the future than the tolerated delay of %d milliseconds.",
			it.issued.UTC().Format(time.RFC1123), now.UTC().Format(time.RFC1123), iteratorTTL.Milliseconds()))}
	}
	start := min(it.pos, len(s.records))
	end := min(start+limit, len(s.records))
	out := &kinesis.GetRecordsOutput{Records: make([]kinesistypes.Record, 0, end-start), MillisBehindLatest: aws.Int64(0)}
	for _, r := range s.records[start:end] {
		out.Records = append(out.Records, kinesistypes.Record{
			Data: append([]byte(nil), r.data...), PartitionKey: aws.String(r.key), SequenceNumber: aws.String(r.seq),
			ApproximateArrivalTimestamp: aws.Time(r.arrival),
		})
	}
	if end < len(s.records) {
		out.MillisBehindLatest = aws.Int64(max(0, now.Sub(s.records[end].arrival).Milliseconds()))
	}
	if !s.open() && end == len(s.records) {
		out.ChildShards = st.children(s)
		return out, nil
	}
	next := iterator{stream: st.name, shard: s.id, pos: end, issued: now}
	out.NextShardIterator = aws.String(next.String())
	return out, nil
}

// DescribeStreamSummary fakes Kinesis DescribeStreamSummary for a stream
// created with CreateStream (by StreamName or StreamARN): its name, ARN,
// status (always ACTIVE), creation time, open shard count, a 24-hour
// retention period, no encryption, provisioned mode and no consumers. An
// unknown stream answers ResourceNotFoundException. A done context fails the
// call at once; Delay applies. ReadFail does not. It is safe for concurrent
// use.
func (k *Kinesis) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	if err := k.begin(ctx, "DescribeStreamSummary"); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	st, err := k.streamFor(in.StreamARN, in.StreamName)
	if err != nil {
		return nil, err
	}
	open := 0
	for _, s := range st.shards {
		if s.open() {
			open++
		}
	}
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &kinesistypes.StreamDescriptionSummary{
		StreamName:              aws.String(st.name),
		StreamARN:               aws.String(st.arn),
		StreamStatus:            kinesistypes.StreamStatusActive,
		StreamCreationTimestamp: aws.Time(st.created),
		OpenShardCount:          aws.Int32(int32(open)),
		RetentionPeriodHours:    aws.Int32(24),
		EncryptionType:          kinesistypes.EncryptionTypeNone,
		StreamModeDetails:       &kinesistypes.StreamModeDetails{StreamMode: kinesistypes.StreamModeProvisioned},
		ConsumerCount:           aws.Int32(0),
		EnhancedMonitoring:      []kinesistypes.EnhancedMetrics{{ShardLevelMetrics: []kinesistypes.MetricsName{}}},
	}}, nil
}
