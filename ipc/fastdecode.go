package ipc

import "github.com/vramscope/vramscope/internal/jsonscan"

// fastDecode parses the common shape of the hot messages (phase, mark,
// sample: flat keys, plain ASCII strings, a mem object) into m, which must
// be zero, without reflection. It returns false, leaving m in any state,
// on anything outside that shape (unknown or differently cased keys,
// escapes, non-ASCII, fractions in integers, ...); the caller then uses
// encoding/json, which alone decides what is an error. Where it returns
// true the result equals json.Unmarshal's (FuzzDecode checks this).
//
// A mem object is decoded into *mem when mem is not nil, not into a new Mem.
func fastDecode(b []byte, m *Message, mem *Mem) bool {
	p := fastParser{Scanner: jsonscan.Scanner{B: b}, mem: mem}
	if !p.Object(func(key []byte) bool { return p.messageField(key, m) }) {
		return false
	}
	p.Space()
	return p.I == len(p.B)
}

type fastParser struct {
	jsonscan.Scanner
	mem *Mem // where a mem object goes; nil: a new Mem
}

// The words every hot message repeats, decoded without an allocation
// (jsonscan.StringOf): the types, the edges and span, and the five phases
// the hook names on its own (docs/protocol.md).
var (
	commonTypes  = []string{TypePhase, TypeSample, TypeMark, TypeStats, TypeAnatomy, TypeHello, TypeGoodbye, TypeOOM}
	commonEdges  = []string{EdgeBegin, EdgeEnd, SpanStep}
	failedValues = []string{FailedOOM, FailedError}
	commonNames  = []string{"forward", "backward", "loss", "step", "zero_grad"}
)

func (p *fastParser) messageField(key []byte, m *Message) bool {
	switch string(key) {
	case "v":
		return p.Int(&m.V)
	case "type":
		return p.StringOf(&m.Type, commonTypes)
	case "seq":
		return p.Uint64(&m.Seq)
	case "t":
		return p.Float(&m.T)
	case "name":
		return p.StringOf(&m.Name, commonNames)
	case "step":
		return p.Int(&m.Step)
	case "micro":
		return p.Int(&m.Micro)
	case "edge":
		return p.StringOf(&m.Edge, commonEdges)
	case "user":
		return p.Bool(&m.User)
	case "grad":
		return p.Bool(&m.Grad)
	case "failed":
		return p.StringOf(&m.Failed, failedValues)
	case "model":
		return p.String(&m.Model)
	case "mem":
		if p.Literal("null") {
			m.Mem = nil
			return true
		}
		if m.Mem == nil { // encoding/json fills an existing pointer again
			if m.Mem = p.mem; m.Mem == nil {
				m.Mem = new(Mem)
			} else {
				*m.Mem = Mem{}
			}
		}
		mem := m.Mem
		return p.Object(func(key []byte) bool { return p.memField(key, mem) })
	case "span":
		return p.StringOf(&m.Span, commonEdges)
	case "same_as":
		if p.Literal("null") {
			m.SameAs = nil
			return true
		}
		v := new(int)
		m.SameAs = v
		return p.Int(v)
	case "input":
		if p.Literal("null") {
			m.Input = nil
			return true
		}
		if m.Input == nil {
			m.Input = new(Input)
		}
		in := m.Input
		return p.Object(func(key []byte) bool { return p.inputField(key, in) })
	}
	return false
}

// inputField decodes one field of a forward's input size.
func (p *fastParser) inputField(key []byte, in *Input) bool {
	var dst **int64
	switch string(key) {
	case "batch":
		dst = &in.Batch
	case "tokens":
		dst = &in.Tokens
	default:
		return false
	}
	if p.Literal("null") {
		*dst = nil
		return true
	}
	v := new(int64)
	*dst = v
	return p.Int64(v)
}

func (p *fastParser) memField(key []byte, mem *Mem) bool {
	switch string(key) {
	case "allocated":
		return p.Int64(&mem.Allocated)
	case "max_allocated":
		return p.Int64(&mem.MaxAllocated)
	case "reserved":
		return p.Int64(&mem.Reserved)
	case "max_reserved":
		return p.Int64(&mem.MaxReserved)
	case "alloc_retries":
		return p.Int64(&mem.AllocRetries)
	case "ooms":
		return p.Int64(&mem.OOMs)
	}
	return false
}
