package metrics

import (
	"github.com/vramscope/vramscope/session"
)

// identityLabels are vramscope_process_info's labels beyond procLabels:
// the rest of the hello's job (docs/protocol.md, "Job identity"), and the
// two labels dcgm-exporter puts on its series, so that a rank's series
// join a device's with on (UUID, Hostname).
var identityLabels = []string{"job_source", "job_step", "node", "pod", "namespace", "UUID", "Hostname"}

var dProcessInfo = desc("process_info", "1 for every training process: its job as the hook read it (job_source, job_step, node, pod, namespace; \"\" when unknown) and dcgm-exporter's UUID and Hostname (the job's node when the hook knows it, else the process's host name) to join on.", procLabels, identityLabels...)

// collectIdentity serves p's vramscope_process_info.
func collectIdentity(p *session.Process, l []string, gauge emit) {
	h := &p.Hello
	var src, step, node, pod, ns string
	if j := h.Job; j != nil {
		src, step, node, pod, ns = j.Source, j.Step, j.Node, j.Pod, j.Namespace
	}
	hostname := node
	if hostname == "" {
		hostname = h.Host
	}
	uuid := ""
	if h.CUDA != nil {
		uuid = h.CUDA.UUID
	}
	gauge(dProcessInfo, 1, append(append([]string{}, l...), src, step, node, pod, ns, uuid, hostname)...)
}
