package ipc

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxJobField is the longest value of a hello's job field, in bytes: room
// for a Slurm job id, a Kubernetes pod name (at most 63 characters) with
// its namespace, or a torchrun run id, and small enough that a label built
// from it stays short.
const MaxJobField = 128

// Job sources a hook names in hello's job.source: where it found Job.ID
// (docs/protocol.md, "Job identity"). A hook may name another; the monitor
// shows it as it is.
const (
	JobSlurm        = "slurm"        // SLURM_JOB_ID
	JobTorchElastic = "torchelastic" // TORCHELASTIC_RUN_ID (torchrun)
	JobKubernetes   = "kubernetes"   // POD_NAME and POD_NAMESPACE only: no job id
	JobExplicit     = "vramscope"    // VRAMSCOPE_JOB
)

// Job is which job of a launcher or scheduler a process belongs to, as the
// hook read it from its environment when it said hello. Every field is ""
// when the environment did not say.
type Job struct {
	// ID identifies the job across its nodes: VRAMSCOPE_JOB, else
	// SLURM_JOB_ID, else TORCHELASTIC_RUN_ID.
	ID string `json:"id,omitempty"`
	// Source says which of those ID came from (the Job* constants).
	Source string `json:"source,omitempty"`
	// Step is the Slurm job step (SLURM_STEP_ID).
	Step string `json:"step,omitempty"`
	// Node is the node the process runs on as the scheduler names it:
	// SLURMD_NODENAME, or NODE_NAME from the Kubernetes downward API
	// (spec.nodeName).
	Node string `json:"node,omitempty"`
	// Pod and Namespace are the Kubernetes pod (POD_NAME, POD_NAMESPACE
	// from the downward API).
	Pod       string `json:"pod,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// validate bounds a job: each field at most MaxJobField bytes of UTF-8
// without control characters (they become labels and table cells), source
// a token, and at least one field set.
func (j *Job) validate() error {
	if *j == (Job{}) {
		return errors.New("field job: empty object")
	}
	for _, f := range []struct{ name, v string }{
		{"job.id", j.ID}, {"job.step", j.Step}, {"job.node", j.Node}, {"job.pod", j.Pod}, {"job.namespace", j.Namespace},
	} {
		if len(f.v) > MaxJobField {
			return fmt.Errorf("field %s: longer than %d bytes", f.name, MaxJobField)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("field %s: not UTF-8", f.name)
		}
		for _, r := range f.v {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
				return fmt.Errorf("field %s: control character %q not allowed", f.name, r)
			}
		}
	}
	if j.Source != "" {
		if err := token("job.source", j.Source); err != nil {
			return err
		}
	}
	return nil
}
