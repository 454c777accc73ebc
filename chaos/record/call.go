package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// Call is one call of a grain (package grains, or protoactor-go's own
// lookup) as its caller saw it: sent, and done when it succeeded or its
// deadline passed, after one or more attempts.
type Call struct {
	Proc     string `json:"proc"`
	Identity string `json:"identity"`
	Sent     int64  `json:"sent"`
	Done     int64  `json:"done"`
	OK       bool   `json:"ok"`
	Attempts int    `json:"attempts"`
	Err      string `json:"err,omitempty"`
}

// ReadCalls reads a file of calls, one JSON object a line (chaos-grains
// -calls). A truncated last line (a write cut by a kill) is ignored.
func ReadCalls(path string) ([]Call, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var calls []Call
	lines := bytes.Split(b, []byte("\n"))
	for i, raw := range lines {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var c Call
		if err := json.Unmarshal(raw, &c); err != nil {
			if i == len(lines)-1 {
				break
			}
			return calls, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		calls = append(calls, c)
	}
	return calls, nil
}
