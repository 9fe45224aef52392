package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxRequestBytes is the limit of one request line (monitor to hook),
// newline included; the hook skips a longer one.
const MaxRequestBytes = 4096

// RequestCensus asks the hook for a census of its live tensors.
const RequestCensus = "census"

// Request is one line the monitor writes to a hook's connection
// (docs/protocol.md, "Requests"): a type, an id the answer carries back,
// and for a census, why it is asked (CensusRequest or CensusSuspect).
type Request struct {
	V      int    `json:"v"`
	Type   string `json:"type"`
	ID     int64  `json:"id"`
	Reason string `json:"reason,omitempty"`
	// CaptureDir, with reason CensusSuspect, asks a CUDA hook to record the
	// allocator's history until its follow-up census and write the
	// snapshot into this directory (absolute; the hook writes only into a
	// directory of its user that others cannot write).
	CaptureDir string `json:"capture_dir,omitempty"`
}

// Line returns r as one newline-terminated request line.
func (r Request) Line() ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeRequest parses one request line (without its newline) as the hook
// reads it: an error for a line it skips; a Request of a type other than
// RequestCensus is one it ignores.
func DecodeRequest(line []byte) (Request, error) {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) >= MaxRequestBytes {
		return Request{}, fmt.Errorf("request longer than %d bytes", MaxRequestBytes)
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return Request{}, fmt.Errorf("request not a JSON object: %s", oneLine(err))
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return Request{}, fmt.Errorf("request: %s", oneLine(err))
	}
	if r.Type != RequestCensus {
		if r.V != Version || r.Type == "" || r.ID < 0 || r.ID >= maxInteger {
			return Request{}, errors.New("request: bad version, type or id")
		}
		return r, nil
	}
	if r.Reason == "" {
		r.Reason = CensusRequest
	}
	if _, ok := raw["id"]; !ok {
		return Request{}, errors.New("request field id: missing")
	}
	return r, r.validate()
}

func (r Request) validate() error {
	if r.V != Version {
		return fmt.Errorf("request: unsupported protocol version %d", r.V)
	}
	if r.ID < 0 || r.ID >= maxInteger {
		return fmt.Errorf("request field id: %d out of range", r.ID)
	}
	if r.Type != RequestCensus {
		return fmt.Errorf("request field type: %q is not %q", clip(r.Type), RequestCensus)
	}
	switch r.Reason {
	case "", CensusRequest, CensusSuspect:
	default:
		return fmt.Errorf("request field reason: %q is neither %q nor %q", clip(r.Reason), CensusRequest, CensusSuspect)
	}
	if d := r.CaptureDir; d != "" && (d[0] != '/' || len(d) > maxHolderFile) {
		return fmt.Errorf("request field capture_dir: not an absolute path of at most %d bytes", maxHolderFile)
	}
	return nil
}
