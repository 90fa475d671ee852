package lease_test

import (
	"testing"

	"github.com/shardsettle/lambdaadapter/lease"
	"github.com/shardsettle/lambdaadapter/lease/leasetest"
)

func TestMemory(t *testing.T) {
	leasetest.TestStore(t, func(t *testing.T) lease.Store { return lease.NewMemory() })
}
