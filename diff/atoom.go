package diff

import (
	"bufio"

	"github.com/vramscope/vramscope/internal/textesc"
)

// writeAtOOM is, for each side that died of an out-of-memory error, what
// was alive then by category (diagnose.AtOOM's lines).
func writeAtOOM(w *bufio.Writer, p *Pair) {
	for _, s := range []struct {
		name string
		side *Side
	}{{"A", &p.A}, {"B", &p.B}} {
		if s.side.AtOOM == nil {
			continue
		}
		for i, l := range s.side.AtOOM.Lines() {
			prefix := "    "
			if i == 0 {
				prefix = "  " + s.name + ": "
			}
			w.WriteString(prefix + textesc.String(l) + "\n")
		}
	}
}
