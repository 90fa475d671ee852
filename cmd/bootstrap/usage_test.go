package main

import (
	"strings"
	"testing"
)

// TestUsageSeveralStreams: the usage text and `bootstrap help leases` say
// that -stream takes a stream's name or several, comma-separated.
func TestUsageSeveralStreams(t *testing.T) {
	for _, want := range []string{"bootstrap leases -table T -stream S ", "S is a stream's name or ARN,\n", "or several, comma-separated (a,b,c):", "each stream's leases under its name"} {
		if !strings.Contains(usage, want) {
			t.Errorf("usage lacks %q:\n%s", want, usage)
		}
	}
	var out, errb strings.Builder
	if code := run([]string{"help", "leases"}, func(string) string { return "" }, &out, &errb); code != 0 {
		t.Fatalf("bootstrap help leases: code %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{"bootstrap leases -table T -stream S1,S2,...", "the same for each stream in turn, under a heading naming it", "a stream's name or ARN, or several, comma-separated (default: LAMBDAADAPTER_STREAM)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bootstrap help leases lacks %q:\n%s", want, out.String())
		}
	}
}

// TestUsageLayout: in the usage text's command list every description
// starts in one column (44) whether it is on the command's line or
// continues it.
func TestUsageLayout(t *testing.T) {
	const column = 43
	in := false
	for i, line := range strings.Split(usage, "\n") {
		switch {
		case line == "Usage:":
			in = true
			continue
		case line == "":
			in = false
		}
		if !in {
			continue
		}
		if strings.HasPrefix(line, "  bootstrap ") {
			if len(line) > column && (line[column-2:column] != "  " || line[column] == ' ') {
				t.Errorf("line %d: the description does not start in column %d: %q", i+1, column+1, line)
			}
			continue
		}
		if strings.TrimLeft(line, " ") != line[column:] || line[column] == ' ' {
			t.Errorf("line %d: a continued description does not start in column %d: %q", i+1, column+1, line)
		}
	}
}
