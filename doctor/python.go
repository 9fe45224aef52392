package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// probeScript runs in the Python the user trains with and prints one JSON
// object. It never raises: each part reports its own error.
const probeScript = `
import json, os, sys
out = {"python": sys.version.split()[0], "executable": sys.executable}
try:
    import vramscope
    from vramscope import _messages
    out["hook"] = {"version": vramscope.__version__, "file": vramscope.__file__,
                   "protocol": getattr(_messages, "PROTOCOL", None),
                   "socket": vramscope.default_socket_path()}
except Exception as exc:
    out["hook_error"] = "%s: %s" % (type(exc).__name__, exc)
try:
    import torch
    t = {"version": torch.__version__, "cuda_build": getattr(torch.version, "cuda", None)}
    try:
        t["cuda_available"] = bool(torch.cuda.is_available())
        if t["cuda_available"]:
            t["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as exc:
        t["cuda_error"] = "%s: %s" % (type(exc).__name__, exc)
    out["torch"] = t
except Exception as exc:
    out["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
out["disable"] = os.environ.get("VRAMSCOPE_DISABLE", "")
print(json.dumps(out))
`

type pyReport struct {
	Python     string `json:"python"`
	Executable string `json:"executable"`
	Hook       *struct {
		Version  string `json:"version"`
		File     string `json:"file"`
		Protocol *int   `json:"protocol"`
		Socket   string `json:"socket"`
	} `json:"hook"`
	HookError string `json:"hook_error"`
	Torch     *struct {
		Version       string   `json:"version"`
		CUDABuild     *string  `json:"cuda_build"`
		CUDAAvailable bool     `json:"cuda_available"`
		Devices       []string `json:"devices"`
		CUDAError     string   `json:"cuda_error"`
	} `json:"torch"`
	TorchError string `json:"torch_error"`
	Disable    string `json:"disable"`
}

// pythonTimeout bounds the probe: importing torch takes seconds on a busy box.
const pythonTimeout = 2 * time.Minute

func askPython(ctx context.Context, python string) (pyReport, error) {
	ctx, cancel := context.WithTimeout(ctx, pythonTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", probeScript)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var rep pyReport
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg != "" {
			return rep, fmt.Errorf("%w: %s", err, msg)
		}
		return rep, err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		return rep, fmt.Errorf("read its answer: %w", err)
	}
	return rep, nil
}

// checkPython asks the user's Python what the hook would do there.
func checkPython(ctx context.Context, o Options, monitorPath string) Section {
	sec := Section{Title: "hook side (" + o.Python + ", this shell's environment)"}
	rep, err := askPython(ctx, o.Python)
	if err != nil {
		fix := "pass the interpreter the training runs with: vramscope doctor --python /path/to/python"
		var ee *exec.Error
		if errors.As(err, &ee) {
			fix = "no such interpreter; " + fix
		}
		sec.add(Fail, "python", fmt.Sprintf("%s did not answer: %v", o.Python, err), fix)
		return sec
	}
	sec.add(OK, "python", rep.Python+" at "+rep.Executable, "")
	if rep.Hook == nil {
		sec.add(Warn, "vramscope", "not importable ("+rep.HookError+"): a script that imports vramscope fails here",
			"install the hook into this Python (pip install the wheel, or pip install ./pyhook), or use vramscope run, which brings its own copy")
	} else {
		h := rep.Hook
		text := fmt.Sprintf("hook %s at %s", h.Version, h.File)
		switch {
		case h.Protocol != nil && *h.Protocol != o.Protocol:
			sec.add(Fail, "vramscope", fmt.Sprintf("%s speaks protocol v%d; this monitor speaks v%d", text, *h.Protocol, o.Protocol),
				"install the hook that matches this monitor (the wheel carries both), or use vramscope run")
		default:
			if h.Protocol != nil {
				text += fmt.Sprintf(", protocol v%d", *h.Protocol)
			}
			sec.add(OK, "vramscope", text, "")
		}
		if h.Socket == monitorPath {
			sec.add(OK, "socket path", "the same as the monitor's", "")
		} else {
			sec.add(Fail, "socket path", fmt.Sprintf("the hook would connect to %s; the monitor uses %s", h.Socket, monitorPath),
				fmt.Sprintf("set VRAMSCOPE_SOCKET=%s for the training process (or start the monitor with --socket %s)", monitorPath, h.Socket))
		}
	}
	if rep.Disable != "" && rep.Disable != "0" {
		sec.add(Warn, "disabled", "VRAMSCOPE_DISABLE="+rep.Disable+" is set: watch() does nothing", "unset VRAMSCOPE_DISABLE")
	}
	if rep.Torch == nil {
		sec.add(Fail, "torch", "not importable ("+rep.TorchError+")", "install torch into this Python, or pass the one that has it: --python")
		return sec
	}
	t := rep.Torch
	build := "a CPU-only build"
	if t.CUDABuild != nil {
		build = "built for CUDA " + *t.CUDABuild
	}
	sec.add(OK, "torch", t.Version+", "+build, "")
	switch {
	case t.CUDAError != "":
		sec.add(Warn, "cuda", "torch.cuda failed: "+t.CUDAError, hostMemoryHint)
	case !t.CUDAAvailable:
		sec.add(Warn, "cuda", "torch.cuda.is_available() is False (no GPU, no driver, or a CPU build)", hostMemoryHint)
	default:
		sec.add(OK, "cuda", fmt.Sprintf("%d device(s): %s", len(t.Devices), strings.Join(t.Devices, ", ")), "")
	}
	return sec
}

// hostMemoryHint says what a run without CUDA still shows: a model on the
// CPU is read through the process's host memory (docs/hook.md, "Devices").
const hostMemoryHint = "CPU runs still work: the hook reads the process's host memory (RSS per phase, exact phase peaks on Linux) and the phases' times; a model on Apple MPS or Intel XPU is read through torch"
