// Package diagnose is the diagnosis: pure functions over a read-only view
// of a process in the store (session.Process, session.Store). It keeps no
// state and changes none. Diagnose gives a process's pattern, peak, causes,
// ending and advice; LayersOf its memory anatomy now and at the peak. The
// TUI, the report, diff and plot all ask these two, so no figure can
// differ between them. docs/diagnosis.md explains each rule.
package diagnose
