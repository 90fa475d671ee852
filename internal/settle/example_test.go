package settle_test

import (
	"fmt"

	"github.com/shardsettle/lambdaadapter/internal/settle"
)

func Example() {
	w := settle.NewWatermark("shardId-000000000000")
	a, _ := w.Deliver("49590338271490256608559692538361571095921575989136588801", 1)
	b, _ := w.Deliver("49590338271490256608559692538361571095921575989136588802", 1)
	c, _ := w.Deliver("49590338271490256608559692538361571095921575989136588803", 1)

	// The third and the first finish before the second.
	for _, t := range []settle.Ticket{c, a} {
		cp, moved, _ := w.Settle(t)
		fmt.Printf("checkpoint %q moved %v\n", cp, moved)
	}
	first, _ := w.FirstUnsettled()
	fmt.Println("first unsettled:", first)

	cp, moved, _ := w.Settle(b)
	fmt.Printf("checkpoint %q moved %v\n", cp, moved)
	_, ok := w.FirstUnsettled()
	fmt.Println("anything unsettled:", ok)
	// Output:
	// checkpoint "" moved false
	// checkpoint "49590338271490256608559692538361571095921575989136588801" moved true
	// first unsettled: 49590338271490256608559692538361571095921575989136588802
	// checkpoint "49590338271490256608559692538361571095921575989136588803" moved true
	// anything unsettled: false
}

// A KPL aggregated record of three sub-records is one delivery of three
// parts: the checkpoint passes it only when all three are settled.
func ExampleTicket_Part() {
	w := settle.NewWatermark("shardId-000000000000")
	t, _ := w.Deliver("100", 3)
	for _, part := range []int{2, 0, 2, 1} {
		cp, moved, err := w.Settle(t.Part(part))
		fmt.Printf("part %d: checkpoint %q moved %v err %v\n", part, cp, moved, err)
	}
	// Output:
	// part 2: checkpoint "" moved false err <nil>
	// part 0: checkpoint "" moved false err <nil>
	// part 2: checkpoint "" moved false err settle: delivery already settled
	// part 1: checkpoint "100" moved true err <nil>
}

// After a seek, tickets issued before it are stale.
func ExampleWatermark_Reset() {
	w := settle.NewWatermark("shardId-000000000000")
	old, _ := w.Deliver("500", 1)
	w.Reset("400") // resume after 400
	_, _, err := w.Settle(old)
	fmt.Println(err)
	cp, _ := w.Checkpoint()
	fmt.Println("checkpoint:", cp)
	// Output:
	// settle: settlement from an earlier epoch
	// checkpoint: 400
}

func ExampleCompareSequence() {
	fmt.Println(settle.CompareSequence("9", "10"))
	fmt.Println(settle.CompareSequence("10", "9"))
	fmt.Println(settle.CompareSequence("42", "42"))
	// Output:
	// -1
	// 1
	// 0
}
