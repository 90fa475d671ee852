package envelope

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHeadersSet(t *testing.T) {
	var h Headers
	h.Set("Content-Type", "text/plain")
	h.Set("x-tenant", "acme")
	h.Set("CONTENT-TYPE", "application/json") // replaces in place
	h.Set("x-Ü", "1")
	want := Headers{{"content-type", "application/json"}, {"x-tenant", "acme"}, {"x-Ü", "1"}}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("after Set (-want +got):\n%s", diff)
	}
}

func TestHeadersLookup(t *testing.T) {
	h := Headers{{"content-type", "application/json"}, {"empty", ""}, {"x-Ü", "1"}}
	tests := []struct {
		name      string
		wantValue string
		wantOK    bool
	}{
		{"content-type", "application/json", true},
		{"Content-Type", "application/json", true},
		{"CONTENT-TYPE", "application/json", true},
		{"empty", "", true},
		{"X-Ü", "1", true},
		{"x-ü", "", false}, // non-ASCII letters are not folded, as in ruststream
		{"content-typ", "", false},
		{"content-type ", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, ok := h.Lookup(tt.name)
			if v != tt.wantValue || ok != tt.wantOK {
				t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tt.name, v, ok, tt.wantValue, tt.wantOK)
			}
			if got := h.Get(tt.name); got != tt.wantValue {
				t.Errorf("Get(%q) = %q, want %q", tt.name, got, tt.wantValue)
			}
		})
	}
}

// A hand-built list may hold upper-case names; they are still found and
// replaced.
func TestHeadersHandBuiltUpperCase(t *testing.T) {
	h := Headers{{"X-Tenant", "acme"}}
	if got := h.Get("x-tenant"); got != "acme" {
		t.Errorf(`Get("x-tenant") = %q, want "acme"`, got)
	}
	h.Set("x-tenant", "other")
	if diff := cmp.Diff(Headers{{"X-Tenant", "other"}}, h); diff != "" {
		t.Errorf("after Set (-want +got):\n%s", diff)
	}
	h.Del("X-TENANT")
	if h.Len() != 0 {
		t.Errorf("after Del: %v, want empty", h)
	}
}

func TestHeadersDel(t *testing.T) {
	h := Headers{{"a", "1"}, {"b", "2"}, {"c", "3"}}
	h.Del("B")
	if diff := cmp.Diff(Headers{{"a", "1"}, {"c", "3"}}, h); diff != "" {
		t.Errorf("after Del (-want +got):\n%s", diff)
	}
	h.Del("missing")
	if h.Len() != 2 {
		t.Errorf("Del of a missing name changed Len to %d", h.Len())
	}
	h.Del("a")
	h.Del("c")
	if h.Len() != 0 {
		t.Errorf("Len = %d after deleting everything", h.Len())
	}
	var empty Headers
	empty.Del("a") // must not panic
}

func TestHeadersDelClearsTheVacatedSlot(t *testing.T) {
	h := Headers{{"a", "1"}, {"b", "2"}}
	backing := h
	h.Del("a")
	if diff := cmp.Diff(Header{}, backing[1]); diff != "" {
		t.Errorf("the vacated slot still holds a header (-want +got):\n%s", diff)
	}
}

func TestHeadersClone(t *testing.T) {
	h := Headers{{"a", "1"}, {"b", "2"}}
	c := h.Clone()
	if diff := cmp.Diff(h, c); diff != "" {
		t.Fatalf("Clone (-want +got):\n%s", diff)
	}
	c.Set("a", "changed")
	c.Set("c", "3")
	h.Set("b", "also changed")
	if diff := cmp.Diff(Headers{{"a", "1"}, {"b", "also changed"}}, h); diff != "" {
		t.Errorf("original after changing the clone (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Headers{{"a", "changed"}, {"b", "2"}, {"c", "3"}}, c); diff != "" {
		t.Errorf("clone after changing the original (-want +got):\n%s", diff)
	}
	if Headers(nil).Clone() != nil {
		t.Error("Clone of nil is not nil")
	}
	if e := (Headers{}).Clone(); e == nil || len(e) != 0 {
		t.Errorf("Clone of empty = %#v, want empty non-nil", e)
	}
}

func TestHeadersAll(t *testing.T) {
	h := Headers{{"a", "1"}, {"b", "2"}, {"c", "3"}}
	var got []string
	for name, value := range h.All() {
		got = append(got, name+"="+value)
		if name == "b" {
			break
		}
	}
	if diff := cmp.Diff([]string{"a=1", "b=2"}, got); diff != "" {
		t.Errorf("All with break (-want +got):\n%s", diff)
	}
}

func TestLower(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"already-lower", "already-lower"},
		{"Content-Type", "content-type"},
		{"ÄÖÜ-X", "ÄÖÜ-x"},
		{"\xffA", "\xffa"}, // invalid UTF-8 kept
	}
	for _, tt := range tests {
		if got := lower(tt.in); got != tt.want {
			t.Errorf("lower(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
