package jsonscan

import "testing"

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
