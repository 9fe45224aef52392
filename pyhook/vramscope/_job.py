"""The job a process belongs to, read from where launchers and schedulers
put it (docs/protocol.md, "Job identity").

Read once, when the hello is built (never on a training step). Each value is
stripped, cut to ``MAX_FIELD`` UTF-8 bytes on a character boundary, and its
control characters become ``?``: the monitor turns them into labels and
table cells. Nothing here raises.
"""

MAX_FIELD = 128

# Where the job id comes from, first match wins: an explicit name, then the
# scheduler's job, then the elastic launcher's run.
_ID_SOURCES = (
    ("VRAMSCOPE_JOB", "vramscope"),
    ("SLURM_JOB_ID", "slurm"),
    ("TORCHELASTIC_RUN_ID", "torchelastic"),
)


def _value(environ, name):
    raw = environ.get(name)
    if not isinstance(raw, str):
        return None
    text = "".join("?" if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in raw).strip()
    if not text:
        return None
    data = text.encode("utf-8", "replace")
    if len(data) > MAX_FIELD:
        text = data[:MAX_FIELD].decode("utf-8", "ignore")
    return text


def read_job(environ):
    """Return hello's ``job`` object for ``environ``, or None when it names
    no job."""
    try:
        return _read(environ)
    except Exception:  # noqa: BLE001 - identity is optional; never break watch()
        return None


def _read(environ):
    job = {}
    for name, source in _ID_SOURCES:
        value = _value(environ, name)
        # torchrun's default rendezvous id is the literal "none".
        if value is not None and not (source == "torchelastic" and value == "none"):
            job["id"], job["source"] = value, source
            break
    step = _value(environ, "SLURM_STEP_ID")
    if step is not None:
        job["step"] = step
    pod = _value(environ, "POD_NAME")
    node = _value(environ, "SLURMD_NODENAME")
    if node is None and (pod is not None or "KUBERNETES_SERVICE_HOST" in environ):
        node = _value(environ, "NODE_NAME")
    if node is not None:
        job["node"] = node
    if pod is not None:
        job["pod"] = pod
        namespace = _value(environ, "POD_NAMESPACE")
        if namespace is not None:
            job["namespace"] = namespace
        job.setdefault("source", "kubernetes")
    return job or None
