package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes the report as one indented JSON object (schema
// vramscope.report/v1, docs/report.md) with every step the store holds.
func (r *Report) WriteJSON(w io.Writer) error { return writeJSON(w, r, "JSON report") }

// WriteJSON writes the job view as one indented JSON object (schema
// vramscope.job-report/v1, docs/report.md).
func (v *JobView) WriteJSON(w io.Writer) error { return writeJSON(w, v, "JSON job report") }

func writeJSON(w io.Writer, v any, what string) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}
