package faultnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// errNotBatch is returned by splitBatch for a body it cannot read; the call
// is then forwarded unchanged.
var errNotBatch = errors.New("faultnet: not a batch request")

// batch is one batch write taken apart: the request's other fields, its
// entries, and which of them fail.
type batch struct {
	fields  map[string]json.RawMessage
	list    string // the field holding the entries: "Records" or "Entries"
	entries []json.RawMessage
	fail    []bool
	failed  int
}

// splitBatch reads a batch write and marks every every-th entry failed.
func splitBatch(body []byte, list string, every int) (*batch, error) {
	b := &batch{list: list}
	if err := json.Unmarshal(body, &b.fields); err != nil {
		return nil, errNotBatch
	}
	if err := json.Unmarshal(b.fields[list], &b.entries); err != nil || len(b.entries) == 0 {
		return nil, errNotBatch
	}
	b.fail = make([]bool, len(b.entries))
	for i := range b.entries {
		if (i+1)%every == 0 {
			b.fail[i] = true
			b.failed++
		}
	}
	return b, nil
}

// kept returns the request with only the entries that do not fail.
func (b *batch) kept() []byte {
	keep := make([]json.RawMessage, 0, len(b.entries)-b.failed)
	for i, e := range b.entries {
		if !b.fail[i] {
			keep = append(keep, e)
		}
	}
	fields := make(map[string]json.RawMessage, len(b.fields))
	for k, v := range b.fields {
		fields[k] = v
	}
	fields[b.list], _ = json.Marshal(keep) // raw messages: cannot fail
	out, _ := json.Marshal(fields)
	return out
}

// partial applies a PartialFailure to a batch write: forwards the entries
// that succeed and answers the failed ones in the service's shape.
func (a *AWS) partial(ctx context.Context, w http.ResponseWriter, r *http.Request, op string, body []byte, f Fault) {
	list := "Entries"
	if a.svc == Kinesis {
		list = "Records"
	}
	b, err := splitBatch(body, list, f.every)
	if err != nil {
		a.forward(ctx, w, r, op, body)
		return
	}
	var up map[string]json.RawMessage // the stand-in's answer to the kept entries
	if b.failed < len(b.entries) {
		resp, ok := a.roundTrip(ctx, w, r, op, b.kept(), true)
		if !ok {
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			a.relay(w, resp)
			return
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if err != nil {
			return // the stand-in went away mid-answer: so does the client's
		}
		if err := json.Unmarshal(raw, &up); err != nil {
			http.Error(w, "faultnet: stand-in's batch answer unreadable: "+err.Error(), http.StatusBadGateway)
			return
		}
	}
	var out []byte
	if a.svc == Kinesis {
		out, err = b.putRecordsAnswer(up, f.code)
	} else {
		out, err = b.sqsBatchAnswer(up, f.code)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	a.answer(w, http.StatusOK, out)
}

// putRecordsAnswer merges the stand-in's PutRecords answer to the kept
// records with the failed ones, in request order.
func (b *batch) putRecordsAnswer(up map[string]json.RawMessage, code string) ([]byte, error) {
	var upRecords []json.RawMessage
	upFailed := 0
	if up != nil {
		if err := json.Unmarshal(up["Records"], &upRecords); err != nil {
			return nil, fmt.Errorf("faultnet: stand-in's PutRecords answer: %w", err)
		}
		if err := json.Unmarshal(up["FailedRecordCount"], &upFailed); err != nil {
			return nil, fmt.Errorf("faultnet: stand-in's PutRecords answer: %w", err)
		}
		if len(upRecords) != len(b.entries)-b.failed {
			return nil, fmt.Errorf("faultnet: stand-in answered %d records for %d", len(upRecords), len(b.entries)-b.failed)
		}
	} else {
		up = map[string]json.RawMessage{}
	}
	stream, _, _ := call{body: mustJSON(b.fields)}.names()
	failedEntry, _ := json.Marshal(map[string]string{"ErrorCode": code, "ErrorMessage": entryMessage(Kinesis, code, stream)})
	records := make([]json.RawMessage, 0, len(b.entries))
	next := 0
	for i := range b.entries {
		if b.fail[i] {
			records = append(records, failedEntry)
			continue
		}
		records = append(records, upRecords[next])
		next++
	}
	up["Records"] = mustJSON(records)
	up["FailedRecordCount"] = mustJSON(upFailed + b.failed)
	return json.Marshal(up)
}

// sqsBatchAnswer adds the failed entries to the stand-in's answer to an SQS
// batch (Successful, Failed).
func (b *batch) sqsBatchAnswer(up map[string]json.RawMessage, code string) ([]byte, error) {
	successful := []json.RawMessage{}
	failed := []json.RawMessage{}
	if up != nil {
		if raw, ok := up["Successful"]; ok {
			if err := json.Unmarshal(raw, &successful); err != nil {
				return nil, fmt.Errorf("faultnet: stand-in's batch answer: %w", err)
			}
		}
		if raw, ok := up["Failed"]; ok {
			if err := json.Unmarshal(raw, &failed); err != nil {
				return nil, fmt.Errorf("faultnet: stand-in's batch answer: %w", err)
			}
		}
	} else {
		up = map[string]json.RawMessage{}
	}
	for i, e := range b.entries {
		if !b.fail[i] {
			continue
		}
		var id struct{ Id string }
		if err := json.Unmarshal(e, &id); err != nil {
			return nil, fmt.Errorf("faultnet: batch entry %d: %w", i, err)
		}
		failed = append(failed, mustJSON(map[string]any{"Id": id.Id, "SenderFault": false, "Code": code, "Message": entryMessage(SQS, code, "")}))
	}
	if successful == nil {
		successful = []json.RawMessage{}
	}
	up["Successful"] = mustJSON(successful)
	up["Failed"] = mustJSON(failed)
	return json.Marshal(up)
}

// entryMessage is the message AWS puts with a failed batch entry's code.
func entryMessage(svc Service, code, stream string) string {
	switch {
	case svc == Kinesis && code == "ProvisionedThroughputExceededException":
		return fmt.Sprintf("Rate exceeded for shard in stream %s under account %s.", stream, account)
	case svc == Kinesis && code == "InternalFailure":
		return msgKinesisInternal
	case svc == SQS && code == "InternalError":
		return msgSQSInternal
	case svc == SQS && code == "RequestThrottled":
		return msgSQSThrottled
	}
	return code
}

// mustJSON marshals a value that cannot fail to marshal (raw messages,
// strings, numbers, bools and maps and slices of them).
func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v) // cannot fail for these values
	return b
}
