package metrics

import (
	"github.com/vramscope/vramscope/session"
)

// identityLabels are vramscope_process_info's labels beyond procLabels:
// the rest of the hello's job (docs/protocol.md, "Job identity"), and the
// two labels dcgm-exporter puts on its series, so that a rank's series
// join a device's with on (UUID, Hostname).
var identityLabels = []string{"job_source", "job_step", "node", "pod", "namespace", "UUID", "Hostname"}

var dProcessInfo = desc("process_info", "1 for every training process: its job as the hook read it (job_source, job_step, node, pod, namespace; \"\" when unknown) and dcgm-exporter's UUID and Hostname (in a Kubernetes pod the node, from NODE_NAME as dcgm-exporter's own Hostname; elsewhere the process's host name, as os.Hostname gives dcgm-exporter) to join on.", procLabels, identityLabels...)

// collectIdentity serves p's vramscope_process_info.
func collectIdentity(p *session.Process, l []string, gauge emit) {
	h := &p.Hello
	var src, step, node, pod, ns string
	if j := h.Job; j != nil {
		src, step, node, pod, ns = j.Source, j.Step, j.Node, j.Pod, j.Namespace
	}
	// dcgm-exporter's Hostname is its NODE_NAME in Kubernetes (its chart
	// sets it from spec.nodeName), else os.Hostname(): a pod's host name
	// is the pod's, so there the node is the key; elsewhere the host name
	// (a Slurm node name may be spelled otherwise).
	hostname := h.Host
	if pod != "" && node != "" {
		hostname = node
	}
	uuid := ""
	if h.CUDA != nil {
		uuid = h.CUDA.UUID
	}
	gauge(dProcessInfo, 1, append(append([]string{}, l...), src, step, node, pod, ns, uuid, hostname)...)
}
