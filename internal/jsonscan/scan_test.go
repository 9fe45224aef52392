package jsonscan

import (
	"testing"
	"unsafe"
)

func TestScannerReadsTheSubset(t *testing.T) {
	p := Scanner{B: []byte(` {"a": -12, "b": 3.5e2, "c": "x y", "d": [true, null], "e": {"f": "}"}} `)}
	var a int64
	var b float64
	var c string
	var d []bool
	var e []byte
	ok := p.Object(func(key []byte) bool {
		switch string(key) {
		case "a":
			return p.Int64(&a)
		case "b":
			return p.Float(&b)
		case "c":
			return p.String(&c)
		case "d":
			return p.Array(func() bool {
				if p.Literal("null") {
					return true
				}
				var v bool
				d = append(d, v)
				return p.Bool(&d[len(d)-1])
			})
		case "e":
			var ok bool
			e, ok = p.ObjectBytes()
			return ok
		}
		return false
	})
	p.Space()
	if !ok || p.I != len(p.B) || a != -12 || b != 350 || c != "x y" || len(d) != 1 || !d[0] || string(e) != `{"f": "}"}` {
		t.Fatalf("ok %v at %d/%d: a %d b %g c %q d %v e %q", ok, p.I, len(p.B), a, b, c, d, e)
	}
}

func TestScannerRefusesWhatItDoesNotTake(t *testing.T) {
	// Each input must be refused, or not be read whole.
	for _, in := range []string{`"a\"b"`, `"é"`, `01`, `1.`, `-`, `1e`, `"unterminated`} {
		p, q := Scanner{B: []byte(in)}, Scanner{B: []byte(in)}
		var s string
		var f float64
		if p.String(&s) && p.I == len(p.B) || q.Float(&f) && q.I == len(q.B) {
			t.Errorf("%q was taken", in)
		}
	}
	var n int
	if p := (Scanner{B: []byte("99999999999999999999")}); p.Int(&n) {
		t.Error("an integer past int64 was taken")
	}
}

// Integers up to 18 digits are read without strconv; the longer ones and
// the bounds still go through it, with the same results.
func TestIntegersReadAsStrconvDoes(t *testing.T) {
	for _, c := range []struct {
		in  string
		v   int64
		ok  bool
		u   uint64
		uok bool
	}{
		{"0", 0, true, 0, true},
		{"-0", 0, true, 0, false},
		{"-12", -12, true, 0, false},
		{"999999999999999999", 999999999999999999, true, 999999999999999999, true},
		{"9223372036854775807", 9223372036854775807, true, 9223372036854775807, true},
		{"9223372036854775808", 9223372036854775807, false, 9223372036854775808, true},
		{"-9223372036854775808", -9223372036854775808, true, 0, false},
	} {
		var v int64
		if ok := (&Scanner{B: []byte(c.in)}).Int64(&v); ok != c.ok || ok && v != c.v {
			t.Errorf("Int64(%s) = %d, %v; want %d, %v", c.in, v, ok, c.v, c.ok)
		}
		var u uint64
		if ok := (&Scanner{B: []byte(c.in)}).Uint64(&u); ok != c.uok || ok && u != c.u {
			t.Errorf("Uint64(%s) = %d, %v; want %d, %v", c.in, u, ok, c.u, c.uok)
		}
	}
}

// A common word is the caller's own string, any other a copy.
func TestStringOfSharesCommonWords(t *testing.T) {
	common := []string{"begin", "end"}
	var s string
	if !(&Scanner{B: []byte(`"end"`)}).StringOf(&s, common) || s != "end" || unsafe.StringData(s) != unsafe.StringData(common[1]) {
		t.Errorf(`StringOf("end") = %q, not the common word`, s)
	}
	if !(&Scanner{B: []byte(`"eval"`)}).StringOf(&s, common) || s != "eval" {
		t.Errorf(`StringOf("eval") = %q`, s)
	}
	if (&Scanner{B: []byte(`"a\"b"`)}).StringOf(&s, common) {
		t.Error("StringOf took an escape")
	}
}
