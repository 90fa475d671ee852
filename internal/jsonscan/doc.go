// Package jsonscan is the JSON scanner shared by the reflection-free
// decoders (internal/event for the Lambda Kinesis event, internal/getrecords
// for the GetRecords answer). It validates and steps over the tokens of a
// JSON text held in a byte slice; each decoder keeps its own field mapping
// on top of it.
//
// It accepts RFC 8259 JSON as encoding/json does: strings may hold raw
// bytes that are not valid UTF-8 but no control characters, escapes are
// \" \\ \/ \b \f \n \r \t and \uXXXX, numbers have no leading zeros, and
// objects and arrays nest at most MaxDepth levels (or a smaller limit the
// caller gives Skip).
//
// Every scanning function takes the input b and the index i of the token to
// read, and returns the index just past what it read, or a *SyntaxError
// naming the offset of the first byte that is not of that form (the length
// of b when the input ends early). Nothing allocates except to report an
// error or to grow the slice AppendUnquoted appends to, nothing retains b,
// and every function is safe for concurrent use.
//
// Usage, skipping every member of an object whose '{' is at i, nested
// level containers deep:
//
//	i, more, err := jsonscan.ObjectStart(b, i)
//	for more {
//		var end int
//		if end, _, err = jsonscan.String(b, i); err != nil { // the key
//			return err
//		}
//		if i, err = jsonscan.Colon(b, end); err != nil {
//			return err
//		}
//		if i, err = jsonscan.Skip(b, i, level+1, jsonscan.MaxDepth); err != nil {
//			return err
//		}
//		i, more, err = jsonscan.ObjectNext(b, i)
//	}
//	return err
package jsonscan
