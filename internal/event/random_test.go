package event

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestDecodeKinesisRandomized runs the fuzz oracle (checkOracle) on events
// generated from a grammar that concentrates on the corners byte-level
// fuzzing reaches slowly: keys in odd letter cases and repeated, nulls,
// values of the wrong type, escapes, invalid UTF-8, data as base64 or byte
// arrays, and timestamps in every number form.
func TestDecodeKinesisRandomized(t *testing.T) {
	iterations := 10000
	if testing.Short() {
		iterations = 1000
	}
	rng := rand.New(rand.NewPCG(20240520, 1))
	for range iterations {
		g := eventGen{rng: rng}
		checkOracle(t, []byte(g.event()))
	}
}

// eventGen writes random Kinesis-like events.
type eventGen struct {
	rng *rand.Rand
	sb  strings.Builder
}

func (g *eventGen) chance(p float64) bool { return g.rng.Float64() < p }

func (g *eventGen) pick(options ...string) string { return options[g.rng.IntN(len(options))] }

func (g *eventGen) event() string {
	g.sb.WriteString("{")
	n := 0
	if g.chance(0.2) {
		g.member(&n, g.pick("window", "state", "shardId"), g.value(2))
	}
	g.member(&n, g.key("Records"), g.records())
	if g.chance(0.03) {
		g.member(&n, g.key("Records"), g.records())
	}
	if g.chance(0.2) {
		g.member(&n, "isFinalInvokeForWindow", g.value(2))
	}
	g.sb.WriteString("}")
	return g.sb.String()
}

func (g *eventGen) member(n *int, key, value string) {
	if *n > 0 {
		g.sb.WriteString(",")
	}
	*n++
	fmt.Fprintf(&g.sb, "%q:%s", key, value)
}

// key returns name, usually as is, sometimes in another letter case or
// with a non-ASCII rune that folds to one of its letters.
func (g *eventGen) key(name string) string {
	switch {
	case g.chance(0.8):
		return name
	case g.chance(0.4):
		return strings.ToUpper(name)
	case g.chance(0.5):
		return strings.ToLower(name)
	case strings.ContainsAny(name, "kK"):
		return strings.Replace(strings.Replace(name, "k", "\u212A", 1), "K", "\u212A", 1)
	case strings.ContainsAny(name, "s"):
		return strings.Replace(name, "s", "\u017F", 1)
	}
	return name + "x"
}

func (g *eventGen) records() string {
	if g.chance(0.03) {
		return g.value(1)
	}
	var b strings.Builder
	b.WriteString("[")
	for i := range g.rng.IntN(4) {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(g.record())
	}
	b.WriteString("]")
	return b.String()
}

func (g *eventGen) record() string {
	if g.chance(0.02) {
		return g.value(1)
	}
	var members []string
	add := func(key, value string) { members = append(members, fmt.Sprintf("%q:%s", g.key(key), value)) }
	for range 1 + g.rng.IntN(2) {
		if g.chance(0.95) {
			add("kinesis", g.kinesis())
		}
	}
	for _, k := range []string{"eventSource", "eventVersion", "eventID", "eventName", "invokeIdentityArn", "awsRegion", "eventSourceARN", "other"} {
		for g.chance(0.7) {
			var v string
			switch k {
			case "eventSource":
				v = g.stringValue(g.pick("aws:kinesis", "aws:kinesis", "aws:sqs", ""))
			case "eventID":
				v = g.stringValue(g.pick("shardId-000000000006:"+g.digits(), "noColon", ":", g.digits()+":x"))
			default:
				v = g.stringValue(g.pick("us-east-2", "arn:aws:kinesis:us-east-2:123456789012:stream/s", "1.0", "é☃", "a\\\"b"))
			}
			add(k, v)
			if g.chance(0.6) {
				break
			}
		}
	}
	g.rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return "{" + strings.Join(members, ",") + "}"
}

func (g *eventGen) kinesis() string {
	if g.chance(0.05) {
		return g.value(1)
	}
	var members []string
	add := func(key, value string) { members = append(members, fmt.Sprintf("%q:%s", g.key(key), value)) }
	if g.chance(0.95) {
		add("sequenceNumber", g.stringValue(g.pick(g.digits(), g.digits(), "", "12a", "-1")))
	}
	for g.chance(0.7) {
		add("data", g.data())
		if g.chance(0.7) {
			break
		}
	}
	for g.chance(0.7) {
		add("approximateArrivalTimestamp", g.timestamp())
		if g.chance(0.8) {
			break
		}
	}
	for _, k := range []string{"partitionKey", "encryptionType", "kinesisSchemaVersion", "other"} {
		if g.chance(0.6) {
			add(k, g.stringValue(g.pick("pk", "NONE", "1.0", "\u00e9", "")))
		}
	}
	g.rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return "{" + strings.Join(members, ",") + "}"
}

func (g *eventGen) digits() string {
	n := 1 + g.rng.IntN(60)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + g.rng.IntN(10))
	}
	return string(b)
}

// stringValue usually quotes s, escaping some of it; sometimes it returns
// null or a value of another type.
func (g *eventGen) stringValue(s string) string {
	switch {
	case g.chance(0.05):
		return "null"
	case g.chance(0.03):
		return g.value(1)
	case g.chance(0.05):
		return "\"" + s + "\xff\xc3\"" // invalid UTF-8
	}
	return g.quote(s)
}

// quote writes s as a JSON string, escaping characters at random.
func (g *eventGen) quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '/' && g.chance(0.5):
			b.WriteString(`\/`)
		case r > 0xFFFF && g.chance(0.5):
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04X`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		case r <= 0xFFFF && g.chance(0.1):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	if g.chance(0.05) {
		b.WriteString(g.pick(`\ud800`, `\udc00x`, `\ud800\u0041`, `\u0000`, `\n`, `\t`))
	}
	b.WriteByte('"')
	return b.String()
}

func (g *eventGen) data() string {
	raw := make([]byte, g.rng.IntN(12))
	for i := range raw {
		raw[i] = byte(g.rng.Uint32())
	}
	switch {
	case g.chance(0.1):
		return "null"
	case g.chance(0.15):
		parts := make([]string, g.rng.IntN(6))
		for i := range parts {
			parts[i] = g.pick("0", "7", "255", "null", "null", "256", "1.5", "-1", `"a"`)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case g.chance(0.05):
		return g.value(1)
	case g.chance(0.1):
		return g.quote(g.pick("QQ", "QQ=", "!!!!", "QUJD\r\n", "QU JD", "QUJDRA=="))
	}
	return g.quote(base64.StdEncoding.EncodeToString(raw))
}

func (g *eventGen) timestamp() string {
	switch {
	case g.chance(0.05):
		return "null"
	case g.chance(0.05):
		return g.value(1)
	}
	return g.pick("1545084650.987", "1545084650", "1.545084650987e9", "-1.25", "0", "-0", "1e400", "1e-400",
		"1716200000.0004999", "123456789012345678901234567890", "9.3e18", "-9.3e18", "1545084650.98749999999999999", "17E8")
}

// value returns a random JSON value nested up to depth levels.
func (g *eventGen) value(depth int) string {
	switch g.rng.IntN(7) {
	case 0:
		return "null"
	case 1:
		return g.pick("true", "false")
	case 2:
		return g.pick("0", "-1.5e3", "12")
	case 3:
		return g.quote(g.pick("x", "", "é"))
	case 4:
		if depth > 0 {
			return "[" + g.value(depth-1) + "," + g.value(depth-1) + "]"
		}
		return "[]"
	default:
		if depth > 0 {
			return `{"a":` + g.value(depth-1) + `}`
		}
		return "{}"
	}
}
