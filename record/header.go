// Package record writes and reads vramscope recordings (docs/format.md):
// an append-only file with one header line, then one session.Event per
// line, optionally gzip-compressed. A replay feeds the same session.Event
// stream as live data.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// FormatMajor is the recording format's major version this build writes
// and the newest it reads. A change that old readers would misread bumps it.
const FormatMajor = 1

// FormatVersion is the full format version written in headers. Minor
// versions only add (fields, event kinds) and old readers skip what they do
// not know.
const FormatVersion = "1.0"

// Header is the first line of a recording.
type Header struct {
	// Format is the format's major version (the "vramscope_recording" key,
	// whose presence also marks the file as a recording). Create sets it.
	Format int `json:"vramscope_recording"`
	// Version is "major.minor" of the format. Create sets it.
	Version string `json:"version"`
	// Created is when recording started (RFC 3339). Create sets it when zero.
	Created time.Time `json:"created"`
	// Tool names the writer and its version, "vramscope 0.1.0".
	Tool string `json:"tool"`
	// Host is the monitor's host name.
	Host string `json:"host"`
	// Argv is the monitor's command line.
	Argv []string `json:"argv"`
	// Source says where the events came from: "live", "demo", "replay".
	Source string `json:"source"`
	// Begins says what the recording holds when it starts in the middle of
	// a session: written as meta.begins (docs/format.md), "" when the file
	// holds the session from its hello. A reader moves a string meta.begins
	// here; one that is not a string stays in Meta.
	Begins string `json:"-"`
	// Meta holds further metadata by name (for example "devices", the NVML
	// device list). Keys a reader does not know are kept as they are.
	Meta map[string]json.RawMessage `json:"meta,omitempty"`
}

// metaBegins is Begins's key in the header's meta object.
const metaBegins = "begins"

// MarshalJSON writes the header with Begins as meta.begins.
func (h Header) MarshalJSON() ([]byte, error) {
	type plain Header
	p := plain(h)
	if h.Begins != "" {
		b, err := json.Marshal(h.Begins)
		if err != nil {
			return nil, err
		}
		p.Meta = make(map[string]json.RawMessage, len(h.Meta)+1)
		for k, v := range h.Meta {
			p.Meta[k] = v
		}
		p.Meta[metaBegins] = b
	}
	return json.Marshal(p)
}

// UnmarshalJSON reads a header, moving a string meta.begins to Begins.
func (h *Header) UnmarshalJSON(data []byte) error {
	type plain Header
	if err := json.Unmarshal(data, (*plain)(h)); err != nil {
		return err
	}
	if raw, ok := h.Meta[metaBegins]; ok && json.Unmarshal(raw, &h.Begins) == nil {
		delete(h.Meta, metaBegins)
		if len(h.Meta) == 0 {
			h.Meta = nil
		}
	}
	return nil
}

// Sources of events.
const (
	SourceLive   = "live"
	SourceDemo   = "demo"
	SourceReplay = "replay"
)

// errNotRecording is wrapped by Open when the file has no header line.
var errNotRecording = errors.New("not a vramscope recording")

// parseHeader decodes and checks a header line.
func parseHeader(line []byte) (Header, error) {
	var probe struct {
		Format *int `json:"vramscope_recording"`
	}
	if err := json.Unmarshal(line, &probe); err != nil || probe.Format == nil {
		return Header{}, fmt.Errorf("%w (the first line is not a vramscope header)", errNotRecording)
	}
	if *probe.Format > FormatMajor {
		return Header{}, fmt.Errorf("recording format %d is newer than this vramscope (reads %d); upgrade vramscope", *probe.Format, FormatMajor)
	}
	if *probe.Format < 1 {
		return Header{}, fmt.Errorf("recording format %d is not valid (formats start at 1)", *probe.Format)
	}
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return Header{}, fmt.Errorf("header: %s", oneLine(err))
	}
	return h, nil
}
