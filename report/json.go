package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes the report as one indented JSON object (schema
// vramscope.report/v1, docs/report.md) with every step the store holds.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write JSON report: %w", err)
	}
	return nil
}
