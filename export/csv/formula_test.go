package csv_test

import (
	"bytes"
	stdcsv "encoding/csv"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/export"
	"github.com/vramscope/vramscope/export/csv"
)

// TestTextCellsAreNeverFormulas: a host or phase name starting with =, +,
// -, @, a tab or a carriage return was written as it is, and a spreadsheet
// opening the CSV ran it as a formula (=HYPERLINK(...), =cmd|...). As OWASP
// recommends, such a cell now starts with a single quote.
func TestTextCellsAreNeverFormulas(t *testing.T) {
	s, _, _, err := export.Load("../../testdata/h100/s001.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	p := s.Processes()[0]
	for _, host := range []string{`=HYPERLINK("http://x")`, "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"} {
		p.Hello.Host = host
		var b bytes.Buffer
		if err := csv.Write(&b, s); err != nil {
			t.Fatal(err)
		}
		rows, err := stdcsv.NewReader(&b).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows[1:] {
			if cell := r[1]; cell == "" || strings.ContainsRune("=+-@\t\r", rune(cell[0])) || !strings.HasPrefix(cell, "'") {
				t.Fatalf("host %q was written as %q, which a spreadsheet reads as a formula", host, cell)
			}
		}
	}
}
