package lambdaadaptertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// InvokeAPI returns a Function that invokes a function through the Lambda
// Invoke API at url, such as the Runtime Interface Emulator's
// http://127.0.0.1:9000/2015-03-31/functions/function/invocations. A
// response other than 200, or a function error (a body with errorType or
// errorMessage, as the runtime reports an error or a panic the handler did
// not recover), is an error: the event source retries the whole batch.
func InvokeAPI(url string, client *http.Client) Function {
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context, payload []byte) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("lambdaadaptertest: invoke: %s: %s", resp.Status, bytes.TrimSpace(body))
		}
		if resp.Header.Get("X-Amz-Function-Error") != "" || isFunctionError(body) {
			return nil, fmt.Errorf("lambdaadaptertest: function error: %s", bytes.TrimSpace(body))
		}
		return body, nil
	}
}

func isFunctionError(body []byte) bool {
	var e struct {
		Type    string `json:"errorType"`
		Message string `json:"errorMessage"`
	}
	return json.Unmarshal(body, &e) == nil && (e.Type != "" || e.Message != "")
}
