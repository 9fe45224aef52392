// Package ipc owns vramscope's wire protocol (docs/protocol.md) and the Unix
// socket server that receives it from the Python hook. It imports only the
// standard library and internal/jsonscan, a standard-library-only scanner it
// shares with the recording reader.
package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// Version is the protocol major version this build speaks.
const Version = 1

// MaxMessageBytes is the hard limit of one message line, newline included.
const MaxMessageBytes = 64 << 10

const (
	maxString  = 4096
	maxName    = 64
	maxArgv    = 32
	maxInteger = 1 << 53
)

// Message types.
const (
	TypeHello   = "hello"
	TypePhase   = "phase"
	TypeMark    = "mark"
	TypeSample  = "sample"
	TypeAnatomy = "anatomy"
	TypeStats   = "stats"
	TypeGoodbye = "goodbye"
	// TypeOOM reports an out-of-memory error the allocator raised, with
	// its state at that moment (sent before the process may die).
	TypeOOM = "oom"
	// TypeCensus is a census of the live tensors and who holds them.
	TypeCensus = "census"
	// TypeAsk is not a hook's: a command (vramscope census) asks the
	// monitor to ask the hook of process pid for a census. It is the only
	// line of its connection, instead of a hello; the monitor answers
	// with one line and closes it.
	TypeAsk = "ask"
)

// Phase edges.
const (
	EdgeBegin = "begin"
	EdgeEnd   = "end"

	// SpanStep is a phase end's span when that read is its step's only one.
	SpanStep = "step"

	// FailedOOM and FailedError are a phase end's failed: the allocator
	// ran out of memory in the phase, or another error unwound it.
	FailedOOM   = "oom"
	FailedError = "error"
)

// Message is one decoded protocol message. Fields that a type does not use
// stay at their zero value. Raw keeps the line it was decoded from, so a
// recorder can store it byte for byte.
type Message struct {
	V    int     `json:"v"`
	Type string  `json:"type"`
	Seq  uint64  `json:"seq"`
	T    float64 `json:"t"`

	// hello
	Session   string      `json:"session,omitempty"`
	PID       int         `json:"pid,omitempty"`
	NSpid     []int       `json:"nspid,omitempty"`
	Host      string      `json:"host,omitempty"`
	Argv      []string    `json:"argv,omitempty"`
	Rank      *int        `json:"rank,omitempty"`
	LocalRank *int        `json:"local_rank,omitempty"`
	WorldSize *int        `json:"world_size,omitempty"`
	Torch     string      `json:"torch,omitempty"`
	CUDA      *CUDADevice `json:"cuda,omitempty"`
	MemSource *MemSource  `json:"mem_source,omitempty"`
	Job       *Job        `json:"job,omitempty"`
	Clock     *Clock      `json:"clock,omitempty"`
	Hook      *HookConfig `json:"hook,omitempty"`

	// phase, mark
	Name  string `json:"name,omitempty"`
	Step  int    `json:"step,omitempty"`
	Micro int    `json:"micro,omitempty"`
	Edge  string `json:"edge,omitempty"`
	User  bool   `json:"user,omitempty"`
	// phase end of the hook's own user phase "eval": a forward of that
	// evaluation ran with gradients enabled (no torch.no_grad())
	Grad bool `json:"grad,omitempty"`
	// phase end of an automatic phase that an error unwound (FailedOOM,
	// FailedError): its step did not finish, and the loop went on
	Failed string `json:"failed,omitempty"`

	// phase begin of forward: the size of the input (may be absent)
	Input *Input `json:"input,omitempty"`

	// phase end of an exact-peaks hook: Span "step" marks a step's only
	// read (its phases were not read); SameAs is the step whose phase
	// breakdown the hook found this step's peak and held memory to match
	// (docs/protocol.md, "Exact peaks").
	Span   string `json:"span,omitempty"`
	SameAs *int   `json:"same_as,omitempty"`
	// phase begin of an exact-peaks hook, beside mem: that read is also
	// the closing read of an earlier step that skipped its update, whose
	// phases' ends carried none (docs/protocol.md, "Exact peaks").
	Closes *Closes `json:"closes,omitempty"`

	// phase (automatic), anatomy: the name of the watch that sent it
	// (watch(name=...), default the model's class name); empty from older hooks
	Model string `json:"model,omitempty"`

	// phase, mark, sample, oom
	Mem *Mem `json:"mem,omitempty"`

	// anatomy
	Weights     int64  `json:"weights,omitempty"`
	Gradients   int64  `json:"gradients,omitempty"`
	Optimizer   int64  `json:"optimizer,omitempty"`
	Activations *int64 `json:"activations,omitempty"`
	BatchSize   *int64 `json:"batch_size,omitempty"`
	Params      int64  `json:"params,omitempty"`
	Device      string `json:"device,omitempty"`
	// Tokens is the step's input tokens; the Activations* fields say when
	// and at which input size Activations was measured, and whether this
	// figure is that measurement or the hook's scaling of it.
	Tokens            *int64 `json:"tokens,omitempty"`
	ActivationsStep   *int   `json:"activations_step,omitempty"`
	ActivationsBatch  *int64 `json:"activations_batch,omitempty"`
	ActivationsTokens *int64 `json:"activations_tokens,omitempty"`
	ActivationsSource string `json:"activations_source,omitempty"`
	// Saved splits Activations by module and adds the loss's own saved
	// tensors (measured steps of newer hooks; nil otherwise).
	Saved *Saved `json:"saved,omitempty"`

	// oom: the open phase, the bytes the failed allocation asked for and
	// the device's free and total memory at that moment.
	Phase       string `json:"phase,omitempty"`
	Requested   *int64 `json:"requested,omitempty"`
	DeviceFree  *int64 `json:"device_free,omitempty"`
	DeviceTotal *int64 `json:"device_total,omitempty"`

	// census
	Census *Census `json:"census,omitempty"`

	// stats, goodbye
	Stats  *Stats `json:"stats,omitempty"`
	Reason string `json:"reason,omitempty"`

	Raw json.RawMessage `json:"-"`
}

// Input is the size of a training forward's input: the batch (dim 0 of the
// first tensor input) and the tokens (batch × dim 1), each nil when unknown.
type Input struct {
	Batch  *int64 `json:"batch"`
	Tokens *int64 `json:"tokens"`
}

// Closes names the step whose closing read a begin edge's read is: a
// plain step that skipped its update ended where this edge begins, and
// the read's max_allocated is its exact peak, as a span "step" read's is.
// SameAs is the hook's same_as for it, nil when it moved. Held false: the
// read came after the loop moved on (a watch that ended with that step),
// so its allocated is not what the step held; nil or true: it is.
type Closes struct {
	Step   int   `json:"step"`
	SameAs *int  `json:"same_as"`
	Held   *bool `json:"held,omitempty"`
}

// Mem is one allocator snapshot, read from torch.cuda.memory_stats().
type Mem struct {
	Allocated    int64 `json:"allocated"`
	MaxAllocated int64 `json:"max_allocated"`
	Reserved     int64 `json:"reserved"`
	MaxReserved  int64 `json:"max_reserved"`
	AllocRetries int64 `json:"alloc_retries,omitempty"`
	OOMs         int64 `json:"ooms,omitempty"`
}

// CUDADevice describes the hook's current CUDA device.
type CUDADevice struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid,omitempty"`
	Name  string `json:"name"`
	Total int64  `json:"total"`
}

// Clock pairs the sender's monotonic and wall clocks, read together.
type Clock struct {
	Mono float64 `json:"mono"`
	Wall float64 `json:"wall"`
}

// HookConfig is how the hook is configured.
type HookConfig struct {
	Version          string  `json:"version"`
	SampleHz         float64 `json:"sample_hz"`
	ResetPeaks       bool    `json:"reset_peaks"`
	ActivationsEvery int     `json:"activations_every"`
	// ExactPeaks: the hook resets the allocator's peak counters after each
	// phase or mark read, so such a read's max_allocated and max_reserved
	// are exact for the interval since the previous one (docs/protocol.md,
	// "Exact peaks"). False (absent) in every hook before it.
	ExactPeaks bool `json:"exact_peaks,omitempty"`
}

// Stats are the hook's own health counters.
type Stats struct {
	Created    uint64 `json:"created"`
	Dropped    uint64 `json:"dropped"`
	Evicted    uint64 `json:"evicted"`
	SendErrors uint64 `json:"send_errors"`
	Connects   uint64 `json:"connects"`
}

// ErrTooLong reports a line over MaxMessageBytes.
var ErrTooLong = fmt.Errorf("line longer than %d bytes", MaxMessageBytes)

// Decode parses and validates one message line (without its newline).
// The returned error is one line, fit to log as it is.
func Decode(line []byte) (*Message, error) {
	m, err := DecodeBare(line)
	if err != nil {
		return nil, err
	}
	m.Raw = append(json.RawMessage(nil), bytes.TrimRight(line, "\r\n")...)
	return m, nil
}

// DecodeBare is Decode for a reader that keeps no copy of the line: Raw
// stays nil (a recording read for a report holds no
// line it will not show).
func DecodeBare(line []byte) (*Message, error) {
	m := new(Message)
	if err := DecodeBareInto(line, m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeBareInto is DecodeBare into a Message the caller owns, which must
// be zero: a reader that folds each message into a store and keeps none
// of them reuses its messages instead of allocating one a line. What the
// message points to (Mem, Saved, ...) is allocated afresh, never shared.
func DecodeBareInto(line []byte, m *Message) error { return decodeBareInto(line, m, nil) }

// DecodeBareReusing is DecodeBareInto that decodes the message's mem object,
// when it has one, into *mem (m.Mem is then mem), not into a new Mem: a
// reader that reuses its messages and a Mem for each allocates nothing for
// the allocator figures most messages carry. The caller that keeps m.Mem
// past mem's reuse must copy it. A line the fast decoder does not take
// (encoding/json decodes it) still gets a Mem of its own.
func DecodeBareReusing(line []byte, m *Message, mem *Mem) error {
	return decodeBareInto(line, m, mem)
}

func decodeBareInto(line []byte, m *Message, mem *Mem) error {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) >= MaxMessageBytes { // the limit counts the newline
		return ErrTooLong
	}
	if !fastDecode(line, m, mem) {
		*m = Message{}
		if err := json.Unmarshal(line, m); err != nil {
			return fmt.Errorf("not JSON: %s", oneLine(err))
		}
	}
	return m.Validate()
}

// Validate checks a message against docs/protocol.md.
func (m *Message) Validate() error {
	if err := m.validateType(); err != nil {
		return err
	}
	if err := m.validateRanges(); err != nil {
		return err
	}
	return m.validateStrings()
}

func (m *Message) validateType() error {
	if m.V != Version {
		return fmt.Errorf("unsupported protocol version %d (this vramscope speaks %d)", m.V, Version)
	}
	if err := finite("t", m.T); err != nil {
		return err
	}
	switch m.Type {
	case TypeHello:
		return m.validateHello()
	case TypePhase:
		if m.Edge != EdgeBegin && m.Edge != EdgeEnd {
			return fmt.Errorf("field edge: %q is neither %q nor %q", m.Edge, EdgeBegin, EdgeEnd)
		}
		if err := m.validateInput(); err != nil {
			return err
		}
		if err := m.validateSpan(); err != nil {
			return err
		}
		if err := m.validateCloses(); err != nil {
			return err
		}
		if m.Grad && (!m.User || m.Edge != EdgeEnd) {
			return errors.New("field grad: only on a user phase's end edge")
		}
		if m.Failed != "" {
			if m.User || m.Edge != EdgeEnd {
				return errors.New("field failed: only on an automatic phase's end edge")
			}
			if m.Failed != FailedOOM && m.Failed != FailedError {
				return errors.New(`field failed: "oom" or "error"`)
			}
		}
		return m.validateMarker()
	case TypeMark:
		return m.validateMarker()
	case TypeSample:
		if m.Mem == nil {
			return errors.New("field mem: missing")
		}
		return m.Mem.validate()
	case TypeAnatomy:
		return m.validateAnatomy()
	case TypeStats:
		if m.Stats == nil {
			return errors.New("field stats: missing")
		}
		return nil
	case TypeGoodbye:
		return nil
	case TypeOOM:
		return m.validateOOM()
	case TypeCensus:
		return m.validateCensus()
	case TypeAsk:
		if m.PID <= 0 {
			return errors.New("field pid: missing or not positive")
		}
		return nil
	case "":
		return errors.New("field type: missing")
	default:
		return fmt.Errorf("unknown message type %q", clip(m.Type))
	}
}

func (m *Message) validateHello() error {
	if m.Session == "" || len(m.Session) > maxName {
		return errors.New("field session: missing or longer than 64 bytes")
	}
	for _, r := range m.Session {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("field session: character %q not allowed", r)
		}
	}
	if m.PID <= 0 {
		return errors.New("field pid: missing or not positive")
	}
	if m.Clock == nil {
		return errors.New("field clock: missing")
	}
	if err := finite("clock.mono", m.Clock.Mono); err != nil {
		return err
	}
	if err := finite("clock.wall", m.Clock.Wall); err != nil {
		return err
	}
	if len(m.Argv) > maxArgv {
		return fmt.Errorf("field argv: more than %d entries", maxArgv)
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"rank", m.Rank}, {"local_rank", m.LocalRank}, {"world_size", m.WorldSize}} {
		if f.v != nil && *f.v < 0 {
			return fmt.Errorf("field %s: negative", f.name)
		}
	}
	for _, p := range m.NSpid {
		if p <= 0 {
			return errors.New("field nspid: not positive")
		}
	}
	if c := m.CUDA; c != nil {
		if c.Index < 0 {
			return errors.New("field cuda.index: negative")
		}
		if err := size("cuda.total", c.Total); err != nil {
			return err
		}
	}
	if s := m.MemSource; s != nil {
		if err := s.validate(); err != nil {
			return err
		}
	}
	if j := m.Job; j != nil {
		if err := j.validate(); err != nil {
			return err
		}
	}
	if h := m.Hook; h != nil {
		if err := finite("hook.sample_hz", h.SampleHz); err != nil {
			return err
		}
	}
	return nil
}

func (m *Message) validateMarker() error {
	if m.Name == "" || len(m.Name) > maxName {
		return errors.New("field name: missing or longer than 64 bytes")
	}
	if m.Step < 0 {
		return errors.New("field step: negative")
	}
	if m.Micro < 0 {
		return errors.New("field micro: negative")
	}
	if !utf8.ValidString(m.Name) {
		return errors.New("field name: not UTF-8")
	}
	if m.Mem != nil {
		return m.Mem.validate()
	}
	return nil
}

func (m *Message) validateAnatomy() error {
	if m.Step < 0 {
		return errors.New("field step: negative")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"weights", m.Weights}, {"gradients", m.Gradients}, {"optimizer", m.Optimizer}, {"params", m.Params}} {
		if err := size(f.name, f.v); err != nil {
			return err
		}
	}
	if m.Activations != nil {
		if err := size("activations", *m.Activations); err != nil {
			return err
		}
	}
	if m.ActivationsStep != nil && *m.ActivationsStep < 0 {
		return errors.New("field activations_step: negative")
	}
	switch m.ActivationsSource {
	case "", "measured", "scaled":
	default:
		return fmt.Errorf("field activations_source: %q is neither \"measured\" nor \"scaled\"", clip(m.ActivationsSource))
	}
	if err := sizes(opt{"batch_size", m.BatchSize}, opt{"tokens", m.Tokens},
		opt{"activations_batch", m.ActivationsBatch}, opt{"activations_tokens", m.ActivationsTokens}); err != nil {
		return err
	}
	if m.Saved != nil {
		return m.Saved.validate(m.Activations)
	}
	return nil
}

// validateInput checks a phase's optional input size.
func (m *Message) validateInput() error {
	if m.Input == nil {
		return nil
	}
	return sizes(opt{"input.batch", m.Input.Batch}, opt{"input.tokens", m.Input.Tokens})
}

// validateSpan checks a phase end's optional span and same_as: span is
// "step" on an end edge that carries a read, same_as an earlier step and
// only beside span "step".
func (m *Message) validateSpan() error {
	switch m.Span {
	case "":
		if m.SameAs != nil {
			return errors.New("field same_as: without span \"step\"")
		}
		return nil
	case SpanStep:
	default:
		return fmt.Errorf("field span: %q is not %q", clip(m.Span), SpanStep)
	}
	if m.Edge != EdgeEnd || m.Mem == nil {
		return errors.New("field span: only on an end edge that carries mem")
	}
	if k := m.SameAs; k != nil && (*k < 0 || *k >= m.Step) {
		return fmt.Errorf("field same_as: %d is not an earlier step than %d", *k, m.Step)
	}
	return nil
}

// validateCloses checks a phase begin's optional closes: only on an
// automatic phase's begin edge that carries mem, naming an earlier step,
// and a same_as earlier than that one.
func (m *Message) validateCloses() error {
	c := m.Closes
	if c == nil {
		return nil
	}
	if m.Edge != EdgeBegin || m.User || m.Mem == nil {
		return errors.New("field closes: only on an automatic phase's begin edge that carries mem")
	}
	if c.Step < 0 || c.Step >= m.Step {
		return fmt.Errorf("field closes.step: %d is not an earlier step than %d", c.Step, m.Step)
	}
	if k := c.SameAs; k != nil && (*k < 0 || *k >= c.Step) {
		return fmt.Errorf("field closes.same_as: %d is not an earlier step than %d", *k, c.Step)
	}
	return nil
}

func (m *Message) validateOOM() error {
	if m.Step < 0 {
		return errors.New("field step: negative")
	}
	if len(m.Phase) > maxName || !utf8.ValidString(m.Phase) {
		return errors.New("field phase: longer than 64 bytes or not UTF-8")
	}
	if err := sizes(opt{"requested", m.Requested}, opt{"device_free", m.DeviceFree}, opt{"device_total", m.DeviceTotal}); err != nil {
		return err
	}
	if m.Mem != nil {
		return m.Mem.validate()
	}
	return nil
}

// opt is an optional byte or count field; nil when absent or null.
type opt struct {
	name string
	v    *int64
}

// sizes checks optional byte or count fields in order.
func sizes(fields ...opt) error {
	for _, f := range fields {
		if f.v != nil {
			if err := size(f.name, *f.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateStrings bounds every free-form string (docs/protocol.md: at most
// 4,096 bytes), whatever the message type.
func (m *Message) validateStrings() error {
	fields := []struct {
		name, v string
	}{{"host", m.Host}, {"torch", m.Torch}, {"device", m.Device}, {"reason", m.Reason}}
	if c := m.CUDA; c != nil {
		fields = append(fields, struct{ name, v string }{"cuda.name", c.Name}, struct{ name, v string }{"cuda.uuid", c.UUID})
	}
	if h := m.Hook; h != nil {
		fields = append(fields, struct{ name, v string }{"hook.version", h.Version})
	}
	for _, f := range fields {
		if len(f.v) > maxString {
			return fmt.Errorf("field %s: longer than %d bytes", f.name, maxString)
		}
	}
	if len(m.Model) > maxName {
		return fmt.Errorf("field model: longer than %d bytes", maxName)
	}
	if !utf8.ValidString(m.Model) {
		return errors.New("field model: not UTF-8")
	}
	for _, a := range m.Argv {
		if len(a) > maxString {
			return fmt.Errorf("field argv: entry longer than %d bytes", maxString)
		}
	}
	return nil
}

func (mem *Mem) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"mem.allocated", mem.Allocated}, {"mem.max_allocated", mem.MaxAllocated},
		{"mem.reserved", mem.Reserved}, {"mem.max_reserved", mem.MaxReserved},
		{"mem.alloc_retries", mem.AllocRetries}, {"mem.ooms", mem.OOMs},
	} {
		if err := size(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func size(field string, v int64) error {
	if v < 0 {
		return fmt.Errorf("field %s: negative (%d)", field, v)
	}
	if v >= maxInteger {
		return fmt.Errorf("field %s: larger than 2^53", field)
	}
	return nil
}

func finite(field string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("field %s: not finite", field)
	}
	if v < 0 {
		return fmt.Errorf("field %s: negative (%g)", field, v)
	}
	return nil
}

func clip(s string) string {
	if len(s) > maxName {
		return s[:maxName] + "…"
	}
	return s
}

func oneLine(err error) string {
	return string(bytes.ReplaceAll([]byte(err.Error()), []byte("\n"), []byte(" ")))
}
