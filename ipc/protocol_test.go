package ipc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixtureLines returns the non-empty lines of a shared protocol fixture.
func fixtureLines(t testing.TB, name string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "protocol", name))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, MaxMessageBytes)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			lines = append(lines, append([]byte(nil), sc.Bytes()...))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan fixture %s: %v", name, err)
	}
	if len(lines) == 0 {
		t.Fatalf("fixture %s is empty", name)
	}
	return lines
}

type invalidCase struct {
	Case  string `json:"case"`
	Line  string `json:"line"`
	Error string `json:"error"`
}

func invalidCases(t testing.TB) []invalidCase {
	t.Helper()
	var cases []invalidCase
	for i, l := range fixtureLines(t, "invalid.jsonl") {
		var c invalidCase
		if err := json.Unmarshal(l, &c); err != nil {
			t.Fatalf("invalid.jsonl line %d: %v", i+1, err)
		}
		cases = append(cases, c)
	}
	return cases
}

func TestDecodeValidFixtures(t *testing.T) {
	for i, line := range fixtureLines(t, "valid.jsonl") {
		var probe struct {
			Type string `json:"type"`
			Seq  uint64 `json:"seq"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			t.Fatalf("line %d: fixture is not JSON: %v", i+1, err)
		}
		m, err := Decode(line)
		if err != nil {
			t.Errorf("line %d (%s): Decode: %v", i+1, probe.Type, err)
			continue
		}
		if m.Type != probe.Type || m.Seq != probe.Seq {
			t.Errorf("line %d: got type %q seq %d, want %q %d", i+1, m.Type, m.Seq, probe.Type, probe.Seq)
		}
		if !bytes.Equal(m.Raw, line) {
			t.Errorf("line %d: Raw differs from the input line", i+1)
		}
		if err := m.Validate(); err != nil {
			t.Errorf("line %d: Validate after Decode: %v", i+1, err)
		}
	}
}

func TestDecodeValidFieldValues(t *testing.T) {
	lines := fixtureLines(t, "valid.jsonl")
	hello, err := Decode(lines[0])
	if err != nil {
		t.Fatal(err)
	}
	if hello.Session != "a1b2c3d4e5f60718" || hello.PID != 4242 || hello.Clock == nil || hello.Clock.Wall != 1763794800.25 {
		t.Errorf("hello fields: %+v", hello)
	}
	if hello.CUDA == nil || hello.CUDA.Total != 85899345920 || hello.Rank == nil || *hello.Rank != 0 {
		t.Errorf("hello cuda/rank: %+v %v", hello.CUDA, hello.Rank)
	}
	phase, err := Decode(lines[1])
	if err != nil {
		t.Fatal(err)
	}
	if phase.Name != "zero_grad" || phase.Edge != EdgeBegin || phase.Mem == nil || phase.Mem.Allocated != 294649856 {
		t.Errorf("phase fields: %+v mem %+v", phase, phase.Mem)
	}
}

func TestDecodeInvalidFixtures(t *testing.T) {
	for _, c := range invalidCases(t) {
		t.Run(c.Case, func(t *testing.T) {
			m, err := Decode([]byte(c.Line))
			if err == nil {
				t.Fatalf("Decode accepted %q: %+v", c.Line, m)
			}
			if m != nil {
				t.Errorf("Decode returned a message with an error")
			}
			if !strings.Contains(err.Error(), c.Error) {
				t.Errorf("error %q does not contain %q", err, c.Error)
			}
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestDecodeTooLong(t *testing.T) {
	huge := bytes.Repeat([]byte("x"), 10<<20)
	if _, err := Decode(huge); !errors.Is(err, ErrTooLong) {
		t.Fatalf("10 MiB line: got %v, want ErrTooLong", err)
	}
	// The limit includes the newline: MaxMessageBytes-1 bytes of content fit.
	fits := padded(t, MaxMessageBytes-1)
	if _, err := Decode(fits); err != nil {
		t.Errorf("line of %d bytes: %v", len(fits), err)
	}
	if _, err := Decode(append(fits, '\n')); err != nil {
		t.Errorf("line of %d bytes with its newline: %v", len(fits)+1, err)
	}
	if _, err := Decode(padded(t, MaxMessageBytes)); !errors.Is(err, ErrTooLong) {
		t.Errorf("line of %d bytes: got %v, want ErrTooLong", MaxMessageBytes, err)
	}
}

// padded returns a valid sample message of exactly n bytes, padded with an
// unknown field.
func padded(t *testing.T, n int) []byte {
	t.Helper()
	head := `{"v":1,"type":"sample","seq":1,"t":1,"mem":{"allocated":1,"max_allocated":1,"reserved":1,"max_reserved":1},"pad":"`
	fill := n - len(head) - 2
	if fill < 0 {
		t.Fatalf("n %d too small", n)
	}
	return []byte(head + strings.Repeat("p", fill) + `"}`)
}

func TestValidateEdgeCases(t *testing.T) {
	cases := []struct {
		name, line, want string
	}{
		{"null", `null`, "unsupported protocol version 0"},
		{"empty", ``, "not JSON"},
		{"infinite hello clock", `{"v":1,"type":"hello","seq":0,"t":1,"session":"s","pid":1,"clock":{"mono":1,"wall":-2}}`, "field clock.wall: negative"},
		{"negative rank", `{"v":1,"type":"hello","seq":0,"t":1,"session":"s","pid":1,"rank":-1,"clock":{"mono":1,"wall":2}}`, "field rank: negative"},
		{"too many argv", `{"v":1,"type":"hello","seq":0,"t":1,"session":"s","pid":1,"clock":{"mono":1,"wall":2},"argv":[` + strings.Repeat(`"a",`, 32) + `"a"]}`, "field argv"},
		{"huge bytes", `{"v":1,"type":"sample","seq":1,"t":1,"mem":{"allocated":9007199254740992,"max_allocated":1,"reserved":1,"max_reserved":1}}`, "larger than 2^53"},
		{"negative anatomy", `{"v":1,"type":"anatomy","seq":1,"t":1,"step":0,"weights":-1}`, "field weights: negative"},
		{"stats missing", `{"v":1,"type":"stats","seq":1,"t":1}`, "field stats: missing"},
		{"negative seq", `{"v":1,"type":"goodbye","seq":-1,"t":1}`, "not JSON"},
		{"long device", `{"v":1,"type":"anatomy","seq":1,"t":1,"step":0,"device":"` + strings.Repeat("d", 4097) + `"}`, "field device"},
		{"long reason", `{"v":1,"type":"goodbye","seq":1,"t":1,"reason":"` + strings.Repeat("r", 4097) + `"}`, "field reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.line))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, l := range fixtureLines(f, "valid.jsonl") {
		f.Add(l)
	}
	for _, l := range fixtureLines(f, "additions.jsonl") {
		f.Add(l)
	}
	for _, c := range invalidCases(f) {
		f.Add([]byte(c.Line))
	}
	fx := readCensusFixture(f)
	for _, l := range fx.Census {
		f.Add([]byte(l))
	}
	for _, c := range fx.Invalid {
		f.Add([]byte(c.Line))
	}
	for _, s := range fastPathEdgeCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkFastPath(t, line)
		m, err := Decode(line)
		if err != nil {
			if m != nil {
				t.Fatalf("message and error both returned")
			}
			if strings.ContainsAny(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded message fails Validate: %v", err)
		}
		// A decoded message's Raw must decode to the same message again.
		again, err := Decode(m.Raw)
		if err != nil {
			t.Fatalf("Raw does not decode again: %v", err)
		}
		if again.Type != m.Type || again.Seq != m.Seq {
			t.Fatalf("Raw decodes differently")
		}
	})
}

// fastPathEdgeCases are inputs where a hand-written parser could easily
// disagree with encoding/json.
var fastPathEdgeCases = []string{
	`{"v":1,"type":"sample","seq":1,"t":1e2,"mem":{"allocated":1,"max_allocated":1,"reserved":1,"max_reserved":1}}`,
	`{"v":1,"type":"sample","seq":1,"t":1,"mem":{"allocated":1e2,"max_allocated":1,"reserved":1,"max_reserved":1}}`,
	`{"v":01,"type":"mark","seq":1,"t":1,"name":"x"}`,
	`{"v":1,"type":"mark","seq":-0,"t":-0,"name":"x"}`,
	`{"v":1,"type":"mark","seq":1,"t":1.,"name":"x"}`,
	`{"v":1,"type":"mark","seq":1,"t":1E+2,"name":"x","name":"y"}`,
	`{"V":2,"v":1,"type":"mark","seq":1,"t":1,"name":"x"}`,
	`{"v":1,"TYPE":"mark","seq":1,"t":1,"name":"x"}`,
	`{"v":1,"type":"mark","seq":18446744073709551616,"t":1,"name":"x"}`,
	`{"v":1,"type":"mark","seq":1,"t":1e400,"name":"x"}`,
	`{"v":1,"type":"mark","seq":1,"t":1,"name":"x\u0041"}`,
	`{"v":1,"type":"mark","seq":1,"t":1,"name":"cafÃ©"}`,
	`{"v":1,"type":"mark","seq":1,"t":1,"name":"ÿ"}`,
	`{"v":1,"type":"phase","seq":1,"t":1,"name":"f","edge":"end","user":null,"mem":null}`,
	`{"v":1,"type":"phase","seq":1,"t":1,"name":"f","edge":"end","mem":{"allocated":5},"mem":{"reserved":7}}`,
	`{"v":1,"type":"phase","seq":1,"t":1,"name":"f","edge":"end","mem":{"allocated":5},"mem":null}`,
	` {"v":1,"type":"goodbye","seq":1,"t":1} ` + "\t",
	`{"v":1,"type":"goodbye","seq":1,"t":1}x`,
	`{"v":1,"type":"goodbye","seq":1,"t":1,}`,
	`{"v":1 "type":"goodbye","seq":1,"t":1}`,
	`{}`, `{`, `{"v"`, `{"v":`, `{"v":-`, `{"step":9223372036854775808}`,
}

// checkFastPath asserts that wherever fastDecode claims success,
// encoding/json agrees exactly, also when the mem object goes into a
// reused Mem (DecodeBareReusing), one that held other figures before.
func checkFastPath(t *testing.T, line []byte) {
	t.Helper()
	var fast Message
	if !fastDecode(line, &fast, nil) {
		return
	}
	var slow Message
	if err := json.Unmarshal(line, &slow); err != nil {
		t.Fatalf("fast path accepted %q, encoding/json says %v", line, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("fast path and encoding/json differ on %q:\n%+v\n%+v", line, fast, slow)
	}
	var reused Message
	slot := Mem{Allocated: 1, MaxAllocated: 2, Reserved: 3, MaxReserved: 4, AllocRetries: 5, OOMs: 6}
	if !fastDecode(line, &reused, &slot) {
		t.Fatalf("fast path refused %q with a Mem to reuse", line)
	}
	if reused.Mem != nil && reused.Mem != &slot {
		t.Errorf("%q: the mem object is not in the Mem given", line)
	}
	if !reflect.DeepEqual(reused, slow) {
		t.Fatalf("fast path into a reused Mem and encoding/json differ on %q:\n%+v\n%+v", line, reused, slow)
	}
}

func TestFastPathAgreesWithJSON(t *testing.T) {
	hits := 0
	all := append([]string(nil), fastPathEdgeCases...)
	for _, l := range fixtureLines(t, "valid.jsonl") {
		all = append(all, string(l))
	}
	for _, c := range invalidCases(t) {
		all = append(all, c.Line)
	}
	for _, s := range all {
		checkFastPath(t, []byte(s))
		var m Message
		if fastDecode([]byte(s), &m, nil) {
			hits++
		}
	}
	if hits < 10 {
		t.Errorf("fast path took only %d of %d inputs: it no longer covers the hot messages", hits, len(all))
	}
}
