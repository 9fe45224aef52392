package ipc

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

type jobFixture struct {
	Hello        map[string]any `json:"hello"`
	Environments []struct {
		Case string            `json:"case"`
		Env  map[string]string `json:"env"`
		Job  *Job              `json:"job"`
	} `json:"environments"`
	Invalid []struct {
		Case  string `json:"case"`
		Line  string `json:"line"`
		Error string `json:"error"`
	} `json:"invalid"`
}

// TestJobFixture decodes the shared fixture's hello with the job each
// environment gives (the hook's side reads the same file): every job the
// hook may send is accepted and read back field by field; the invalid ones
// fail with their one-line error.
func TestJobFixture(t *testing.T) {
	b, err := os.ReadFile("../testdata/protocol/job.json")
	if err != nil {
		t.Fatal(err)
	}
	var f jobFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Environments) < 8 || len(f.Invalid) == 0 {
		t.Fatal("fixture lost its cases")
	}
	jobs := 0
	for _, c := range f.Environments {
		f.Hello["job"] = c.Job
		if c.Job == nil {
			delete(f.Hello, "job")
		}
		line, _ := json.Marshal(f.Hello)
		m, err := Decode(line)
		if err != nil {
			t.Fatalf("%s: %v", c.Case, err)
		}
		switch {
		case c.Job == nil && m.Job != nil:
			t.Errorf("%s: job %+v, want none", c.Case, m.Job)
		case c.Job != nil && (m.Job == nil || *m.Job != *c.Job):
			t.Errorf("%s: job %+v, want %+v", c.Case, m.Job, c.Job)
		case c.Job != nil:
			jobs++
		}
	}
	if jobs < 6 {
		t.Errorf("only %d environments name a job", jobs)
	}
	for _, c := range f.Invalid {
		_, err := Decode([]byte(c.Line))
		if err == nil || !strings.Contains(err.Error(), c.Error) {
			t.Errorf("%s: error %v, want %q", c.Case, err, c.Error)
		}
	}
}
