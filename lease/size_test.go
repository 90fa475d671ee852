package lease

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// itemSize is the size DynamoDB bills an item for, by its documented
// rules: each attribute's name plus its value; a string its UTF-8 bytes; a
// number 1 byte per 2 significant digits plus 1; a list or map 3 bytes plus
// 1 per element plus the elements (a map's keys count as names).
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		digits := strings.Trim(strings.NewReplacer(".", "", "-", "").Replace(v.Value), "0")
		return (len(digits)+1)/2 + 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	panic(fmt.Sprintf("valueSize of %T", v))
}

// workerItem is a worker row as Heartbeat leaves it.
func workerItem(stream, owner string, counter int64, load *Load) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrKey:          &types.AttributeValueMemberS{Value: workerKey(stream, owner)},
		attrKind:         &types.AttributeValueMemberS{Value: kindWorker},
		attrWorkerStream: &types.AttributeValueMemberS{Value: stream},
		attrOwner:        &types.AttributeValueMemberS{Value: owner},
		attrCounter:      number(counter),
		attrRenewedAt:    &types.AttributeValueMemberS{Value: time.Now().UTC().Format(renewedAtLayout)},
	}
	if load != nil {
		item[attrLoad] = encodeLoad(compactLoad(load))
	}
	return item
}

// busyLoad is a load of n shards with realistic rates.
func busyLoad(n int) *Load {
	l := &Load{CPU: 0.437, Shards: map[string]Throughput{}}
	for i := range n {
		l.Shards[fmt.Sprintf("shardId-%012d", i)] = Throughput{Records: 812.3456 + float64(i), Bytes: 734123.9 + float64(i*1000), Polls: 4.8765}
	}
	return l
}

// TestItemSizes logs the sizes of typical rows (for the cost formula in the
// package documentation) and pins the bound on worker rows.
func TestItemSizes(t *testing.T) {
	const stream, owner = "orders", "ecs-task/0123456789abcdef0123456789abcdef-a1b2c3d4e5f6"
	seq := "49590338271490256608559692538361571095921575989136588898"
	held := Lease{Key: Key{Stream: stream, ShardID: "shardId-000000000042"}, Owner: owner, Counter: 123456, Checkpoint: seq,
		OwnerSwitches: 7, RenewedAt: time.Now()}
	leaseRow := encode(held)
	leaseRow[attrWriteToken] = &types.AttributeValueMemberS{Value: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
	free := encode(Lease{Key: held.Key, Counter: 3, RenewedAt: time.Now()})
	leader := encode(Lease{Key: LeaderKey(stream), Owner: owner, Counter: 99, RenewedAt: time.Now()})
	index := map[string]types.AttributeValue{attrKey: leaseRow[attrKey], attrOwner: leaseRow[attrOwner]}
	sizes := []struct {
		name string
		item map[string]types.AttributeValue
	}{
		{"held lease row (checkpoint, token)", leaseRow},
		{"free lease row, no checkpoint", free},
		{"leader row", leader},
		{"worker row, no load", workerItem(stream, owner, 1234, nil)},
		{"worker row, load of 20 shards", workerItem(stream, owner, 1234, busyLoad(20))},
		{"worker row, load of 1,000 shards", workerItem(stream, owner, 1234, busyLoad(1000))},
		{"worker row, load of 5,000 shards (1,000 kept)", workerItem(stream, owner, 1234, busyLoad(5000))},
		{"owner index entry (KEYS_ONLY)", index},
	}
	for _, s := range sizes {
		t.Logf("%-48s %6d bytes", s.name, itemSize(s.item))
	}
	if n := itemSize(workerItem(stream, owner, 1234, busyLoad(5000))); n > 64<<10 {
		t.Errorf("a worker row with the largest load takes %d bytes, want at most 64 KB (DynamoDB's limit is 400 KB)", n)
	}
}
