package lease_test

import (
	"regexp"
	"testing"

	"github.com/shardsettle/lambdaadapter/lease"
)

func TestNewOwnerID(t *testing.T) {
	for _, tc := range []struct {
		name, host, task string
		want             string // regular expression
	}{
		{"host", "ip-10-0-0-1", "", `^ip-10-0-0-1-[0-9a-f]{12}$`},
		{"no host", "", "", `^worker-[0-9a-f]{12}$`},
		{"task id", "ip-10-0-0-1", "0123456789abcdef0123456789abcdef", `^ecs-task/0123456789abcdef0123456789abcdef-[0-9a-f]{12}$`},
		{"task ARN", "h", "arn:aws:ecs:eu-west-1:123456789012:task/prod/0123abcd", `^ecs-task/0123abcd-[0-9a-f]{12}$`},
		{"ARN without id", "h", "arn:aws:ecs:eu-west-1:123456789012:task/prod/", `^h-[0-9a-f]{12}$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			re := regexp.MustCompile(tc.want)
			a, b := lease.NewOwnerID(tc.host, tc.task), lease.NewOwnerID(tc.host, tc.task)
			for _, id := range []string{a, b} {
				if !re.MatchString(id) {
					t.Errorf("NewOwnerID(%q, %q) = %q, want a match of %s", tc.host, tc.task, id, tc.want)
				}
			}
			if a == b {
				t.Errorf("two calls returned the same id %q", a)
			}
		})
	}
}
