package monitoring

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"

	"github.com/vramscope/vramscope/internal/promtest"
)

// hookEnv is every environment variable the hook reads its job identity
// from: those of the shared fixture testdata/protocol/job.json, which
// pyhook/tests/test_job.py holds the hook to.
func hookEnv(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../testdata/protocol/job.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Environments []struct {
			Env map[string]string `json:"env"`
		} `json:"environments"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range f.Environments {
		for k := range e.Env {
			out[k] = true
		}
	}
	return out
}

type k8sContainer struct {
	Name          string   `yaml:"name"`
	Command       []string `yaml:"command"`
	Args          []string `yaml:"args"`
	RestartPolicy string   `yaml:"restartPolicy"`
	Env           []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// TestKubernetesJobShape checks the Kubernetes recipe: the monitor is a
// native sidecar (an init container that restarts) running `record` with
// its socket on the volume the trainer mounts at the same path, metrics on
// the pod's IP at the port named "vramscope" that the Kubernetes scrape
// config keeps; the trainer points VRAMSCOPE_SOCKET there and sets, from
// the downward API, exactly the variables the hook reads (checked against
// the shared fixture the hook's tests use); both run as one non-root uid.
func TestKubernetesJobShape(t *testing.T) {
	b, err := os.ReadFile("deploy/kubernetes-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Template struct {
				Spec struct {
					SecurityContext struct {
						RunAsUser    int  `yaml:"runAsUser"`
						RunAsNonRoot bool `yaml:"runAsNonRoot"`
					} `yaml:"securityContext"`
					InitContainers []k8sContainer `yaml:"initContainers"`
					Containers     []k8sContainer `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&job); err != nil || job.Kind != "Job" {
		t.Fatalf("first document: kind %q, %v", job.Kind, err)
	}
	var policy struct {
		Kind string `yaml:"kind"`
	}
	if err := dec.Decode(&policy); err != nil || policy.Kind != "NetworkPolicy" {
		t.Errorf("second document: kind %q, %v; want the NetworkPolicy that keeps the port to Prometheus", policy.Kind, err)
	}
	pod := job.Spec.Template.Spec
	if pod.SecurityContext.RunAsUser == 0 || !pod.SecurityContext.RunAsNonRoot {
		t.Errorf("pod security context %+v: one non-root uid for both containers", pod.SecurityContext)
	}
	if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
		t.Fatalf("%d sidecars, %d containers", len(pod.InitContainers), len(pod.Containers))
	}
	side, trainer := pod.InitContainers[0], pod.Containers[0]
	cmd := strings.Join(append(side.Command, side.Args...), " ")
	if side.RestartPolicy != "Always" || !strings.Contains(cmd, "vramscope record --socket /run/vramscope/vramscope.sock") ||
		!strings.Contains(cmd, "--prometheus $(POD_IP):9840") {
		t.Errorf("sidecar: restartPolicy %q, command %q", side.RestartPolicy, cmd)
	}
	if len(side.Ports) != 1 || side.Ports[0].Name != "vramscope" || side.Ports[0].ContainerPort != 9840 {
		t.Errorf("sidecar ports %+v", side.Ports)
	}
	mounts := func(c k8sContainer) string {
		for _, m := range c.VolumeMounts {
			if m.Name == "vramscope-socket" {
				return m.MountPath
			}
		}
		return ""
	}
	if mounts(side) != "/run/vramscope" || mounts(trainer) != "/run/vramscope" {
		t.Errorf("socket volume at %q and %q, want both at /run/vramscope", mounts(side), mounts(trainer))
	}
	reads := hookEnv(t)
	env := map[string]string{}
	for _, e := range trainer.Env {
		env[e.Name] = e.Value + e.ValueFrom.FieldRef.FieldPath
		if e.Name != "VRAMSCOPE_SOCKET" && !reads[e.Name] {
			t.Errorf("trainer sets %s, which the hook does not read", e.Name)
		}
	}
	for name, want := range map[string]string{
		"VRAMSCOPE_SOCKET": "/run/vramscope/vramscope.sock",
		"VRAMSCOPE_JOB":    "metadata.labels['batch.kubernetes.io/job-name']",
		"POD_NAME":         "metadata.name", "POD_NAMESPACE": "metadata.namespace", "NODE_NAME": "spec.nodeName",
	} {
		if env[name] != want {
			t.Errorf("trainer %s = %q, want %q", name, env[name], want)
		}
	}
}

// TestSystemdUnitAndContainer checks the systemd unit and the container
// recipe run `record --prometheus` on a private socket directory, bound to
// loopback unless told otherwise, and runs the unit's ExecStart as systemd
// would (its $$ and %% unescaped, its directories moved to a temporary
// one): it serves /metrics and writes its recording, named for the host.
func TestSystemdUnitAndContainer(t *testing.T) {
	unit, err := os.ReadFile("deploy/vramscope-monitor.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=/bin/sh -c 'exec /usr/local/bin/vramscope record -o ", "--socket /run/vramscope/vramscope.sock",
		`--prometheus "$$VRAMSCOPE_PROMETHEUS"`, "Environment=VRAMSCOPE_PROMETHEUS=127.0.0.1:9840", "RuntimeDirectoryMode=0700", "StateDirectoryMode=0700", "NoNewPrivileges=yes"} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("the systemd unit lacks %q", want)
		}
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		if out, err := exec.Command(sa, "verify", "deploy/vramscope-monitor.service").CombinedOutput(); err != nil && bytes.Contains(out, []byte("vramscope-monitor.service:")) {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	}
	runExecStart(t, string(unit))
	cf, err := os.ReadFile("deploy/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"record", "--socket", "/run/vramscope/vramscope.sock", "--prometheus", "0.0.0.0:9840"`, "USER 1000:1000", "-p 127.0.0.1:9840:9840", "CGO_ENABLED=1 go build"} {
		if !bytes.Contains(cf, []byte(want)) {
			t.Errorf("the Containerfile lacks %q", want)
		}
	}
}

// TestSlurmMonitorScript runs deploy/slurm-monitor.sh as srun would start
// it on one node of job 81234, with the real binary: it writes the
// file-based discovery target for the node (the file prometheus-slurm.yml
// reads, readable to Prometheus), its monitor serves /metrics there, and on
// SIGTERM (the job's end) the target is removed, no temporary file is left,
// and the recording is closed whole.
func TestSlurmMonitorScript(t *testing.T) {
	bin := binary(t)
	dir := privateDir(t)
	targets, runs := filepath.Join(dir, "targets"), filepath.Join(dir, "runs")
	for _, d := range []string{targets, runs} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	port := promtest.FreeAddr(t)
	port = port[strings.LastIndexByte(port, ':')+1:]
	cmd := exec.Command("bash", "deploy/slurm-monitor.sh")
	cmd.Env = append(os.Environ(), "VRAMSCOPE="+bin, "SLURM_JOB_ID=81234", "SLURMD_NODENAME=node-3",
		"VRAMSCOPE_BIND=127.0.0.1", "VRAMSCOPE_PORT="+port, "VRAMSCOPE_TARGETS="+targets, "VRAMSCOPE_RUNS="+runs,
		"VRAMSCOPE_SOCKET="+filepath.Join(dir, "sock", "vramscope.sock"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	target := filepath.Join(targets, "81234-node-3.json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sd []struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	for {
		if b, err := os.ReadFile(target); err == nil {
			if err := json.Unmarshal(b, &sd); err != nil {
				t.Fatalf("target file %s: %v", b, err)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no target file; the script said:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm()&0o044 != 0o044 {
		t.Errorf("the target file is not readable to Prometheus: %v %v", fi.Mode(), err)
	}
	if len(sd) != 1 || len(sd[0].Targets) != 1 || sd[0].Targets[0] != "127.0.0.1:"+port ||
		sd[0].Labels["slurm_job"] != "81234" || sd[0].Labels["slurm_node"] != "node-3" {
		t.Fatalf("target file: %+v", sd)
	}
	var body string
	for body == "" {
		if resp, err := http.Get("http://" + sd[0].Targets[0] + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the node's monitor never answered; the script said:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !strings.Contains(body, "vramscope_processes 0") {
		t.Errorf("/metrics of the node:\n%s", firstLines(body, 20))
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("the script ended with %v:\n%s", err, out.String())
	}
	if left, _ := os.ReadDir(targets); len(left) != 0 {
		t.Errorf("the target directory keeps %v after the monitor stopped", left)
	}
	if fi, err := os.Stat(filepath.Join(runs, "node-3.jsonl.gz")); err != nil || fi.Size() == 0 {
		t.Errorf("the node's recording: %v", err)
	}
	if !strings.Contains(out.String(), "wrote ") {
		t.Errorf("the monitor did not close its recording:\n%s", out.String())
	}
}

func firstLines(s string, n int) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	for i := 0; i < n && sc.Scan(); i++ {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// runExecStart runs the unit's ExecStart line with systemd's escapes
// undone and /usr/local/bin, /run/vramscope and /var/lib/vramscope moved
// under a temporary directory, until /metrics answers; then stops it as
// systemd does (SIGTERM) and checks the recording.
func runExecStart(t *testing.T, unit string) {
	t.Helper()
	var line string
	for _, l := range strings.Split(unit, "\n") {
		if strings.HasPrefix(l, "ExecStart=") {
			line = strings.TrimPrefix(l, "ExecStart=")
		}
	}
	dir := privateDir(t)
	for _, d := range []string{"run", "lib"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	line = strings.NewReplacer("$$", "$", "%%", "%", "/usr/local/bin/vramscope", binary(t),
		"/run/vramscope", filepath.Join(dir, "run"), "/var/lib/vramscope", filepath.Join(dir, "lib")).Replace(line)
	args := strings.SplitN(line, " ", 3) // /bin/sh -c '...'
	if len(args) != 3 || args[0] != "/bin/sh" || args[1] != "-c" {
		t.Fatalf("ExecStart %q: want /bin/sh -c '...'", line)
	}
	addr := promtest.FreeAddr(t)
	cmd := exec.Command(args[0], args[1], strings.Trim(args[2], "'"))
	cmd.Env = append(os.Environ(), "VRAMSCOPE_PROMETHEUS="+addr)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unit's monitor never served %s:\n%s", addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("the unit's monitor ended with %v:\n%s", err, out.String())
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	recs, _ := filepath.Glob(filepath.Join(dir, "lib", host+"-*Z.jsonl.gz"))
	if len(recs) != 1 {
		t.Errorf("recordings %v, want one named for the host and the time:\n%s", recs, out.String())
	}
}

// TestSlurmJobScript runs deploy/slurm-job.sh as sbatch would on one node,
// with an srun that runs its command once, here: the monitor step starts
// before the training, which sees VRAMSCOPE_SOCKET and the node's target
// file; when the training ends the monitor is stopped, its target removed
// and its recording closed, and the job exits with the training's status.
func TestSlurmJobScript(t *testing.T) {
	bin := binary(t)
	dir := privateDir(t)
	stubs, targets, runs := filepath.Join(dir, "bin"), filepath.Join(dir, "targets"), filepath.Join(dir, "runs")
	for _, d := range []string{stubs, targets} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// srun OPTIONS... COMMAND...: the command, in place of srun (signals reach it).
	srun := "#!/bin/sh\nwhile [ $# -gt 0 ]; do case $1 in --*) shift ;; *) break ;; esac; done\nexec \"$@\"\n"
	if err := os.WriteFile(filepath.Join(stubs, "srun"), []byte(srun), 0o700); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	port := promtest.FreeAddr(t)
	port = port[strings.LastIndexByte(port, ':')+1:]
	seen := filepath.Join(dir, "seen")
	// The training waits (5 s at most) for its node's monitor: the socket
	// and the target file; it exits 7, or 1 without a socket.
	training := `for i in $(seq 50); do [ -S "$VRAMSCOPE_SOCKET" ] && ls "$VRAMSCOPE_TARGETS"/*.json >/dev/null 2>&1 && break; sleep 0.1; done
ls "$VRAMSCOPE_TARGETS" > ` + seen + `; [ -S "$VRAMSCOPE_SOCKET" ] && exit 7; exit 1`
	cmd := exec.Command("bash", "deploy/slurm-job.sh", "sh", "-c", training)
	cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "VRAMSCOPE="+bin,
		"SLURM_JOB_ID=81234", "SLURMD_NODENAME=node-0", "SLURM_SUBMIT_DIR="+filepath.Dir(wd),
		"VRAMSCOPE_BIND=127.0.0.1", "VRAMSCOPE_PORT="+port, "VRAMSCOPE_TARGETS="+targets, "VRAMSCOPE_RUNS="+runs)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("the job ended with %v, want the training's status 7:\n%s", err, out.String())
	}
	if b, err := os.ReadFile(seen); err != nil || strings.TrimSpace(string(b)) != "81234-node-0.json" {
		t.Errorf("the training saw targets %q (%v), want its node's:\n%s", b, err, out.String())
	}
	if left, _ := os.ReadDir(targets); len(left) != 0 {
		t.Errorf("targets left after the job: %v", left)
	}
	if fi, err := os.Stat(filepath.Join(runs, "node-0.jsonl.gz")); err != nil || fi.Size() == 0 || !strings.Contains(out.String(), "wrote ") {
		t.Errorf("the node's recording: %v\n%s", err, out.String())
	}
}
