package event

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shardsettle/lambdaadapter/internal/jsonscan"
)

// checkExactKeys checks the key fast paths (exactRecordKey,
// exactKinesisKey) against the slow path they shortcut (objKey plus
// recordKey or kinesisKey) on the key whose quote starts in: whenever the
// fast path claims the key, the slow path must classify it the same way
// and find its value at the same index.
func checkExactKeys(t *testing.T, in []byte) {
	t.Helper()
	if len(in) == 0 || in[0] != '"' {
		return
	}
	for _, p := range []struct {
		name  string
		fast  func(*decoder, int) (int, int)
		class func([]byte) int
	}{
		{"record", (*decoder).exactRecordKey, recordKey},
		{"kinesis", (*decoder).exactKinesisKey, kinesisKey},
	} {
		d := decoder{buf: in}
		k, j := p.fast(&d, 0)
		if k == keyUnknown {
			if j != 0 {
				t.Fatalf("%s fast path on %q: no key but index %d", p.name, in, j)
			}
			continue
		}
		slow := decoder{buf: in}
		key, sj, err := slow.objKey(0)
		if err != nil {
			t.Fatalf("%s fast path on %q: key %d at %d, slow path error %v", p.name, in, k, j, err)
		}
		if sk := p.class(key); sk != k || sj != j {
			t.Fatalf("%s fast path on %q: key %d value at %d, slow path key %d value at %d", p.name, in, k, j, sk, sj)
		}
	}
}

// checkScanRepeated scans the strings at the given offsets of in, in order,
// with scanRepeated (whose memory of the last value is the fast path) and
// with jsonscan.String, which it shortcuts: both must agree on every one.
func checkScanRepeated(t *testing.T, in []byte, offs []int, key int) {
	t.Helper()
	fast := decoder{buf: in}
	for _, i := range offs {
		if i >= len(in) || in[i] != '"' {
			continue
		}
		se, sf, serr := jsonscan.String(in, i)
		fe, ff, ferr := fast.scanRepeated(i, key)
		if se != fe || sf != ff || (serr == nil) != (ferr == nil) {
			t.Fatalf("string at %d of %q: scanRepeated (%d, %d, %v), jsonscan.String (%d, %d, %v)", i, in, fe, ff, ferr, se, sf, serr)
		}
	}
}

// keyVariants are spellings around the known keys: exact, with
// whitespace, another letter case, escapes, truncated, extended.
func keyVariants() []string {
	var vs []string
	for id := keyKinesis; id < nKeys; id++ {
		n := string(keyNames[id])
		vs = append(vs,
			`"`+n+`":1`, `"`+n+`" :1`, `"`+n+`": 1`, `"`+n+"\":\n\t1", `"`+n+`":`, `"`+n+`"`, `"`+n,
			`"`+strings.ToUpper(n)+`":1`, `"`+n+`x":1`, `"`+n[:len(n)-1]+`":1`, fmt.Sprintf(`"\u%04x%s":1`, n[0], n[1:]),
			`"`+n+`\"":1`, `"`+n+`":"v"`, `"`+n+`":  `, `"`+n+`ARN":1`, `"`+n[:1]+`\u00`+n[1:]+`":1`,
		)
	}
	return vs
}

// TestExactKeysMatchSlowPath runs checkExactKeys on every known key and
// spellings close to them.
func TestExactKeysMatchSlowPath(t *testing.T) {
	for _, v := range keyVariants() {
		checkExactKeys(t, []byte(v))
	}
}

// TestScanRepeatedMatchesString runs checkScanRepeated on runs of
// strings that repeat, differ in one byte, grow, shrink, end early, or
// hold escapes, control characters and non-ASCII bytes.
func TestScanRepeatedMatchesString(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []string{"a", "b", ":", "/", `\"`, `\\`, `\u00e9`, "\xff", "é", "\x01", `"`, `\`, " "}
	for range 5000 {
		base := ""
		for range rng.IntN(12) {
			base += alphabet[rng.IntN(len(alphabet))]
		}
		var in []byte
		var offs []int
		for range 1 + rng.IntN(6) {
			v := base
			switch rng.IntN(5) {
			case 1:
				v += alphabet[rng.IntN(len(alphabet))]
			case 2:
				if len(v) > 0 {
					v = v[:rng.IntN(len(v))]
				}
			case 3:
				if len(v) > 0 {
					b := []byte(v)
					b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))][0]
					v = string(b)
				}
			}
			offs = append(offs, len(in))
			in = append(in, '"')
			in = append(in, v...)
			if rng.IntN(8) > 0 {
				in = append(in, '"')
			}
			in = append(in, ',')
		}
		if rng.IntN(4) == 0 {
			in = in[:rng.IntN(len(in)+1)]
		}
		checkScanRepeated(t, in, offs, keyEventSourceARN)
	}
}

// FuzzFastPaths checks the decoder's fast paths against the slow paths
// they replace on arbitrary input: the key fast paths on in as a key
// and scanRepeated on in split at its quotes into a run of strings.
func FuzzFastPaths(f *testing.F) {
	for _, v := range keyVariants() {
		f.Add([]byte(v))
	}
	f.Add([]byte(`"arn:aws:kinesis:us-east-1:1:stream/s","arn:aws:kinesis:us-east-1:1:stream/s","arn:aws:kinesis:us-east-1:1:stream/t"`))
	f.Add([]byte(`"a\"b","a\"b","a\"b`))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkExactKeys(t, in)
		var offs []int
		for i, c := range in {
			if c == '"' {
				offs = append(offs, i)
			}
		}
		checkScanRepeated(t, in, offs, keyEventName)
	})
}
