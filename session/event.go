// Package session is vramscope's timeline store. It turns the events of
// every source (hook messages, NVML samples, connection notes), live or
// replayed, into per-process series, phase spans, steps and anatomy. It
// keeps state only: the diagnosis (package diagnose) reads it. It does no
// I/O: its callers feed it.
package session

import (
	"time"

	"github.com/vramscope/vramscope/ipc"
	"github.com/vramscope/vramscope/probe"
)

// Event is one thing that happened. Exactly one of Msg, GPU and Note is set.
type Event struct {
	// At is when the monitor received the event (wall clock).
	At time.Time
	// Conn identifies the hook connection a message or note came from; 0 for
	// events that come from no connection (NVML samples).
	Conn uint64
	// Msg is a decoded, validated hook message.
	Msg *ipc.Message
	// GPU is one NVML sample of one device.
	GPU *probe.Sample
	// Note is a connection event or a problem worth keeping.
	Note *Note
}

// NoteKind says what a Note is about.
type NoteKind string

// Note kinds.
const (
	NoteConnect    NoteKind = "connect"    // a hook connected
	NoteDisconnect NoteKind = "disconnect" // a hook's connection ended
	NoteError      NoteKind = "error"      // a bad message was skipped
	NoteInfo       NoteKind = "info"       // anything else worth a line
	// NoteResume opens a recording started in the middle of a connection:
	// Seq is the last message the connection had sent before it, so the
	// messages before are not counted as lost.
	NoteResume NoteKind = "resume"
	// NoteSkip says the monitor's own view skipped a connection's messages
	// up to Seq because its consumer fell behind (feed.DefaultLimit). They
	// are not lost: a recording has them. The feed makes these notes for
	// its consumer only; they are never recorded.
	NoteSkip NoteKind = "skip"
	// NoteRefused says the socket server refused a connection (it was
	// full of live hooks): Conn is 0, and that hook's data never arrived.
	NoteRefused NoteKind = "refused"
	// NoteRequest is a request the monitor wrote to the hook on Conn
	// (docs/protocol.md, "Requests"): Text says why, and ends with the
	// request line as it was sent.
	NoteRequest NoteKind = "request"
)

// Note is a connection event or a one-line problem report.
type Note struct {
	Kind NoteKind `json:"kind"`
	Text string   `json:"text"`
	// Seq is set on NoteResume and NoteSkip notes.
	Seq uint64 `json:"seq,omitempty"`
	// Count is how many events a NoteSkip note stands for (all kinds, the
	// connection's messages and notes).
	Count uint64 `json:"count,omitempty"`
}
