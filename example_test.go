package lambdaadapter_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardsettle/lambdaadapter"
	"github.com/shardsettle/lambdaadapter/lambdaadaptertest"
)

// A handler fails one record in the middle of a batch: the response names
// exactly that record, so Lambda checkpoints just before it.
func ExampleAdapter_Invoke() {
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("user-1", []byte(`{"id":1}`))
	failing := b.Add("user-2", []byte(`{"id":2}`), "x-tenant", "acme")
	b.Add("user-3", []byte(`{"id":3}`))

	a, err := lambdaadapter.New(lambdaadapter.HandlerFunc(
		func(ctx context.Context, m *lambdaadapter.Message) lambdaadapter.Outcome {
			if m.Header("x-tenant") == "acme" {
				return lambdaadapter.Retry(errors.New("tenant database down"))
			}
			return lambdaadapter.Ack()
		}))
	if err != nil {
		panic(err)
	}
	resp, err := a.Invoke(context.Background(), b.JSON())
	if err != nil {
		panic(err)
	}
	fmt.Println(string(resp) == `{"batchItemFailures":[{"itemIdentifier":"`+failing+`"}]}`)
	fmt.Println(len(failing), "digits")
	// Output:
	// true
	// 56 digits
}

// JSON decodes payloads for the handler; one that does not decode is
// dropped as a poison record instead of blocking the shard.
func ExampleJSON() {
	type order struct {
		ID int `json:"id"`
	}
	b := lambdaadaptertest.NewBatch("orders")
	b.Add("a", []byte(`{"id":1}`))
	b.Add("b", []byte(`garbage`))
	a, err := lambdaadapter.New(lambdaadapter.JSON(
		func(ctx context.Context, o order, m *lambdaadapter.Message) lambdaadapter.Outcome {
			fmt.Println("order", o.ID)
			return lambdaadapter.Ack()
		}))
	if err != nil {
		panic(err)
	}
	resp, _ := a.Invoke(context.Background(), b.JSON())
	fmt.Println(string(resp))
	// Output:
	// order 1
	// {"batchItemFailures":[]}
}
