# vramscope's build and test entry points. `make test` is the test command
# the README and CI use.

PYTHON ?= /usr/bin/python3
BIN    := $(CURDIR)/bin/vramscope
export CGO_ENABLED := 1
# go-nvml's C headers warn about deprecated declarations; they are harmless.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build test test-go test-race test-py venv-torch2 check-pkg wheel check-wheel check-install bench vet demo

all: build

# The version comes from the build info Go stamps (module version and VCS
# revision), the same for make, go build and go install: no -ldflags.
build:
	go build -o $(BIN) .

vet:
	go vet ./...

test-go: build
	VRAMSCOPE_BIN=$(BIN) go test ./...

# The hook's tests run twice: under the system Python, which carries Debian's
# torch 1.13, then in the torch 2.x venv (venv-torch2, built if missing) with
# the real Lightning, transformers and accelerate. The first is skipped loudly
# without pytest, unless VRAMSCOPE_REQUIRE_TORCH=1 (set by CI), which makes a
# missing test stack a failure; the second never skips.
test-py: build
	@if $(PYTHON) -c 'import pytest' 2>/dev/null; then \
		cd pyhook && VRAMSCOPE_BIN=$(BIN) PYTHONPATH=$(CURDIR)/pyhook $(PYTHON) -m pytest -q -p no:cacheprovider tests; \
	elif [ "$$VRAMSCOPE_REQUIRE_TORCH" = 1 ]; then \
		echo "FAIL: $(PYTHON) has no pytest (apt-get install python3-pytest python3-torch)"; exit 1; \
	else \
		echo "!!!! SKIPPED the pyhook tests: $(PYTHON) has no pytest (apt-get install python3-pytest python3-torch) !!!!"; \
	fi
	$(MAKE) --no-print-directory venv-torch2
	cd pyhook && VRAMSCOPE_BIN=$(BIN) VRAMSCOPE_REQUIRE_TORCH=1 VRAMSCOPE_REQUIRE_FRAMEWORKS=1 HF_HUB_OFFLINE=1 \
		PYTHONPATH=$(CURDIR)/pyhook $(T2_PY) -m pytest -q -p no:cacheprovider tests

# The torch 2.x stack: a venv built from the pinned requirements, cached on
# the machine keyed by the hash of that file and of the base Python, built
# here when missing. A failed build fails make (never a skip); a half-built
# venv has no .complete and is rebuilt from scratch; flock keeps two makes
# from building the same one.
T2_REQ   := $(CURDIR)/pyhook/requirements-torch2.txt
T2_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/vramscope
T2_VENV   = $(T2_CACHE)/venv-torch2-$(shell { cat $(T2_REQ); $(PYTHON) -VV; } | sha256sum | cut -c1-16)
T2_PY     = $(T2_VENV)/bin/python

venv-torch2:
	@mkdir -p $(T2_CACHE)
	@flock $(T2_CACHE)/.lock sh -ec 'if [ ! -e $(T2_VENV)/.complete ]; then \
		echo "== building the torch 2.x venv $(T2_VENV) from $(T2_REQ)"; start=$$(date +%s); \
		rm -rf $(T2_VENV); $(PYTHON) -m venv $(T2_VENV); \
		$(T2_PY) -m pip install -q -r $(T2_REQ) || { echo "FAIL: could not build the torch 2.x venv from $(T2_REQ)"; exit 1; }; \
		$(T2_PY) -m pip check; touch $(T2_VENV)/.complete; \
		echo "== torch 2.x venv built in $$(( $$(date +%s) - start )) s"; fi'

# The packages where goroutines meet: the socket server, the feed, the
# recorder, the demo's clients, the TUI's replay reader and the Prometheus
# exporter.
test-race:
	go test -race ./ipc ./feed ./record ./demo ./tui ./metrics

test: vet test-go test-race test-py

# The hook installs as a normal package (PyPI users: pip install ./pyhook).
# Here PyPI is out of reach, so the build backend comes from the system.
check-pkg:
	rm -rf $(CURDIR)/bin/pkgcheck
	$(PYTHON) -m pip install -q --no-build-isolation --no-deps --target $(CURDIR)/bin/pkgcheck ./pyhook
	cd /tmp && PYTHONPATH=$(CURDIR)/bin/pkgcheck $(PYTHON) -c 'import vramscope, vramscope.integrations.lightning, vramscope.integrations.transformers, sys; assert vramscope.__file__.startswith("$(CURDIR)/bin/pkgcheck"), vramscope.__file__; print("pip install ./pyhook: vramscope", vramscope.__version__)'
	rm -rf $(CURDIR)/bin/pkgcheck $(CURDIR)/pyhook/build

# The platform wheel: the hook package with the monitor binary inside and a
# `vramscope` command, as ruff and uv ship theirs (docs/install.md). Built
# from a staging copy so ./pyhook itself never holds a binary.
WHEEL_DIR := $(CURDIR)/bin/dist
WHEEL_SRC := $(CURDIR)/bin/wheel-src
wheel:
	rm -rf $(WHEEL_SRC) $(WHEEL_DIR)
	mkdir -p $(WHEEL_SRC)/vramscope/_bin $(WHEEL_DIR)
	cp pyhook/pyproject.toml pyhook/setup.py pyhook/README.md $(WHEEL_SRC)/
	cd pyhook && find vramscope -name '*.py' -not -path '*/__pycache__/*' -exec cp --parents {} $(WHEEL_SRC)/ \;
	go build -trimpath -o $(WHEEL_SRC)/vramscope/_bin/vramscope .
	cd $(WHEEL_SRC) && $(PYTHON) -m pip wheel -q --no-build-isolation --no-deps -w $(WHEEL_DIR) .
	rm -rf $(WHEEL_SRC)
	@ls $(WHEEL_DIR)/vramscope-*.whl

# CI's check of the wheel: a fresh venv (no torch, no PyPI), the wheel
# installed offline, the monitor run from it, the hook imported from it, and
# `vramscope run` attaching the wheel's hook to the system Python's torch.
WHEEL_VENV := $(CURDIR)/bin/wheel-venv
check-wheel: wheel
	rm -rf $(WHEEL_VENV)
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install -q --no-index --no-deps $(WHEEL_DIR)/vramscope-*.whl
	cd /tmp && $(WHEEL_VENV)/bin/vramscope version
	cd /tmp && $(WHEEL_VENV)/bin/vramscope demo --headless --steps 5 >/dev/null
	cd /tmp && $(WHEEL_VENV)/bin/python -c 'import vramscope, sys; assert vramscope.__file__.startswith("$(WHEEL_VENV)"), vramscope.__file__; print("wheel: import vramscope", vramscope.__version__, "from", vramscope.__file__)'
	cd /tmp && $(WHEEL_VENV)/bin/python -m vramscope version | grep -q '^protocol: v'
	cd /tmp && $(WHEEL_VENV)/bin/vramscope run --record $(WHEEL_VENV)/run.jsonl -- $(PYTHON) $(CURDIR)/testdata/run/train.py --steps 3
	$(WHEEL_VENV)/bin/vramscope report $(WHEEL_VENV)/run.jsonl | grep -q 'totals: 3 steps'
	rm -rf $(WHEEL_VENV)
	@echo "check-wheel: passed"

# `go install .` from a fresh clone stamps the commit into the version (a
# git worktree does not: Go finds no .git directory there).
INSTALL_CHECK := $(CURDIR)/bin/install-check
check-install:
	rm -rf $(INSTALL_CHECK)
	git clone -q --no-checkout $(CURDIR) $(INSTALL_CHECK)/src
	git -C $(INSTALL_CHECK)/src checkout -q $$(git rev-parse HEAD)
	cd $(INSTALL_CHECK)/src && GOFLAGS=-buildvcs=true GOBIN=$(INSTALL_CHECK)/bin go install .
	$(INSTALL_CHECK)/bin/vramscope version | tee $(INSTALL_CHECK)/version.txt
	grep -q "^revision: $$(git rev-parse HEAD)" $(INSTALL_CHECK)/version.txt
	rm -rf $(INSTALL_CHECK)
	@echo "check-install: passed"

bench: build
	go test -run '^$$' -bench . -benchmem ./...
	PYTHONPATH=$(CURDIR)/pyhook $(PYTHON) bench/hook_marker.py
	PYTHONPATH=$(CURDIR)/pyhook $(PYTHON) bench/step_overhead.py

demo: build
	$(BIN) demo
