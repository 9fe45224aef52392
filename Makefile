# vramscope's build and test entry points. `make test` is the test command
# the README and CI use.

PYTHON ?= /usr/bin/python3
BIN    := $(CURDIR)/bin/vramscope
export CGO_ENABLED := 1
# go-nvml's C headers warn about deprecated declarations; they are harmless.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build truth test test-go test-race test-py venv-torch2 check-pkg wheel wheels release-binaries check-wheels check-auditwheel check-tag check-install bench vet demo

all: build

# The version is pyhook/vramscope/_version.py's, compiled in; the revision
# comes from the build info Go stamps. The same for make, go build, go
# install and the wheels, with no -ldflags (the release's only strip: -s -w).
build:
	go build -o $(BIN) .

vet:
	go vet ./...

test-go: build
	VRAMSCOPE_BIN=$(BIN) go test ./...

# The hook's tests run twice: under the system Python, which carries Debian's
# torch 1.13, and in the torch 2.x venv (venv-torch2, built if missing) with
# the real Lightning, transformers and accelerate. The two suites run side by
# side (one core each): the torch 1.13 suite's output waits in a log, printed
# under its own heading when it ends, and either suite failing fails make. The
# first is skipped loudly without pytest, unless VRAMSCOPE_REQUIRE_TORCH=1 (set
# by CI), which makes a missing test stack a failure; the second never skips.
T1_TEST = cd pyhook && VRAMSCOPE_BIN=$(BIN) PYTHONPATH=$(CURDIR)/pyhook \
	$(PYTHON) -m pytest -q -rs -p no:cacheprovider tests
T2_PYTEST = cd pyhook && VRAMSCOPE_BIN=$(BIN) VRAMSCOPE_REQUIRE_TORCH=1 VRAMSCOPE_REQUIRE_FRAMEWORKS=1 \
	HF_HUB_OFFLINE=1 PYTHONPATH=$(CURDIR)/pyhook $(T2_PY) -m pytest -q -rs -p no:cacheprovider
# The torch 2.x suite is the longer one: its truth corpus runs as a process
# of its own, beside the rest of it, once the torch 1.13 suite is done (a
# core would idle from then on).
T2_CORPUS = tests/test_truth_corpus.py
T2_TEST = $(T2_PYTEST) --ignore=$(T2_CORPUS) tests
T2_CORPUS_TEST = $(T2_PYTEST) $(T2_CORPUS)

test-py: build
	@log=$$(mktemp); pid=; \
	if $(PYTHON) -c 'import pytest' 2>/dev/null; then \
		echo "== torch 1.13 suite ($(PYTHON)) started beside the torch 2.x one"; \
		( $(T1_TEST) ) >$$log 2>&1 & pid=$$!; trap 'kill $$pid 2>/dev/null' INT TERM; \
	elif [ "$$VRAMSCOPE_REQUIRE_TORCH" = 1 ]; then \
		echo "FAIL: $(PYTHON) has no pytest (apt-get install python3-pytest python3-torch)"; rm -f $$log; exit 1; \
	else \
		echo "!!!! SKIPPED the pyhook tests: $(PYTHON) has no pytest (apt-get install python3-pytest python3-torch) !!!!"; \
	fi; \
	rc2=0; $(MAKE) --no-print-directory venv-torch2 || rc2=$$?; \
	log3=$$(mktemp); pid3=; \
	if [ $$rc2 = 0 ]; then \
		( while [ -n "$$pid" ] && kill -0 $$pid 2>/dev/null; do sleep 2; done; $(T2_CORPUS_TEST) ) \
			>$$log3 2>&1 & pid3=$$!; trap 'kill $$pid $$pid3 2>/dev/null' INT TERM; \
		echo "== torch 2.x suite ($(T2_PY)); its truth corpus apart, once the torch 1.13 suite ends"; \
		( $(T2_TEST) ) || rc2=$$?; \
	fi; \
	rc1=0; if [ -n "$$pid" ]; then \
		wait $$pid || rc1=$$?; echo "== torch 1.13 suite ($(PYTHON)), its output:"; cat $$log; \
	fi; \
	rc3=0; if [ -n "$$pid3" ]; then \
		wait $$pid3 || rc3=$$?; echo "== torch 2.x truth corpus ($(T2_CORPUS)), its output:"; cat $$log3; \
	fi; rm -f $$log $$log3; \
	if [ $$rc1 != 0 ] || [ $$rc2 != 0 ] || [ $$rc3 != 0 ]; then \
		echo "FAIL: the pyhook tests: torch 1.13 suite exit $$rc1, torch 2.x suite exit $$rc2, its truth corpus exit $$rc3"; exit 1; fi

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

# The release (docs/install.md, section 1): one monitor binary per platform
# people train on, with checksums, and the wheels that carry them, as ruff
# and uv ship theirs, plus a hook-only py3-none-any wheel for every
# other machine. Linux builds use cgo for NVML (aarch64 with Debian's cross
# gcc, gcc-aarch64-linux-gnu), which ties them to glibc >= 2.34; a static
# build without cgo (and so without NVML) serves older Linux as
# manylinux_2_17. macOS has no NVML, so cgo is off there. The
# one version is pyhook/vramscope/_version.py's (the Go program embeds it).
# Each wheel is built from a staging copy, so ./pyhook never holds a binary.
VERSION     := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' pyhook/vramscope/_version.py)
RELEASE_DIR := $(CURDIR)/bin/release
WHEEL_DIR   := $(CURDIR)/bin/dist
WHEEL_SRC   := $(CURDIR)/bin/wheel-src
AARCH64_CC  ?= aarch64-linux-gnu-gcc
RELEASE_GO   = go build -trimpath -ldflags="-s -w" -o $(RELEASE_DIR)/vramscope-$(VERSION)-$(1) .
WHEEL_PLATFORMS := linux-x86_64,linux-aarch64,linux-x86_64-static,linux-aarch64-static,macos-arm64,macos-x86_64,any

release-binaries:
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	GOOS=linux GOARCH=amd64 CGO_ENABLED=1 $(call RELEASE_GO,linux-amd64)
	GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=$(AARCH64_CC) $(call RELEASE_GO,linux-arm64)
	GOOS=linux GOARCH=amd64 CGO_ENABLED=0 $(call RELEASE_GO,linux-amd64-static)
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(call RELEASE_GO,linux-arm64-static)
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(call RELEASE_GO,darwin-arm64)
	GOOS=darwin GOARCH=amd64 CGO_ENABLED=0 $(call RELEASE_GO,darwin-amd64)
	cd $(RELEASE_DIR) && sha256sum vramscope-$(VERSION)-* > SHA256SUMS

# $(1): the monitor binary the wheel carries; empty for the hook-only wheel.
# setup.py reads the platform tag from the binary itself.
define build-wheel
	rm -rf $(WHEEL_SRC) && mkdir -p $(WHEEL_SRC)
	cp pyhook/pyproject.toml pyhook/setup.py pyhook/README.md $(WHEEL_SRC)/
	cd pyhook && find vramscope -name '*.py' -not -path '*/__pycache__/*' -exec cp --parents {} $(WHEEL_SRC)/ \;
	$(if $(1),install -D -m 0755 $(1) $(WHEEL_SRC)/vramscope/_bin/vramscope)
	cd $(WHEEL_SRC) && $(PYTHON) -m pip wheel -q --no-build-isolation --no-deps -w $(WHEEL_DIR) .
	rm -rf $(WHEEL_SRC)
endef

wheels: release-binaries
	rm -rf $(WHEEL_DIR) && mkdir -p $(WHEEL_DIR)
	$(call build-wheel,$(RELEASE_DIR)/vramscope-$(VERSION)-linux-amd64)
	$(call build-wheel,$(RELEASE_DIR)/vramscope-$(VERSION)-linux-arm64)
	$(call build-wheel,$(RELEASE_DIR)/vramscope-$(VERSION)-linux-amd64-static)
	$(call build-wheel,$(RELEASE_DIR)/vramscope-$(VERSION)-linux-arm64-static)
	$(call build-wheel,$(RELEASE_DIR)/vramscope-$(VERSION)-darwin-arm64)
	$(call build-wheel,$(RELEASE_DIR)/vramscope-$(VERSION)-darwin-amd64)
	$(call build-wheel,)
	@ls -l $(WHEEL_DIR)

# Only this machine's wheel, for trying it out: go build with the host's gcc.
wheel:
	rm -rf $(WHEEL_DIR) && mkdir -p $(WHEEL_DIR)
	go build -trimpath -ldflags="-s -w" -o $(CURDIR)/bin/wheel-bin/vramscope .
	$(call build-wheel,$(CURDIR)/bin/wheel-bin/vramscope)
	rm -rf $(CURDIR)/bin/wheel-bin
	@ls $(WHEEL_DIR)/vramscope-*.whl

# CI's and the release's check of the wheels (make wheels first):
# - wheelcheck.py: names, tags, versions, what each binary links (readelf,
#   Mach-O headers), and which wheel pip installs on each kind of machine;
#   test_wheelcheck.py: it fails each wheel broken the way a build could;
# - this machine's wheel (x86_64, cgo) in a fresh venv (no torch, no PyPI),
#   installed offline as `pip install vramscope` would pick it:
#   the monitor run from it, the hook imported from it, and `vramscope run`
#   attaching the wheel's hook to the system Python's torch;
# - the aarch64 wheel's binary (as pip installed it) run under qemu-user;
# - the static wheels' binaries, as pip installed them for glibc 2.28/2.31;
# - the hook-only wheel in a fresh venv: the hook imports, the command says
#   how to get a monitor.
WHEEL_VENV  := $(CURDIR)/bin/wheel-venv
WHEEL_PICKS := $(CURDIR)/bin/wheel-picks
QEMU_ARM64  ?= qemu-aarch64-static -L /usr/aarch64-linux-gnu
check-wheels:
	rm -rf $(WHEEL_VENV) $(WHEEL_PICKS)
	$(PYTHON) packaging/wheelcheck.py $(WHEEL_DIR) --expect $(WHEEL_PLATFORMS) --picks $(WHEEL_PICKS)
	cd packaging && WHEEL_DIR=$(WHEEL_DIR) $(PYTHON) -m pytest -q -rs -p no:cacheprovider test_wheelcheck.py
	cd $(RELEASE_DIR) && sha256sum -c --quiet SHA256SUMS
	$(PYTHON) -m venv $(WHEEL_VENV)
	# as a user would: pip picks this machine's wheel (here the cgo x86_64 one) from all of them
	$(WHEEL_VENV)/bin/python -m pip install -q --no-index --find-links $(WHEEL_DIR) vramscope==$(VERSION)
	cd /tmp && $(WHEEL_VENV)/bin/vramscope version | tee $(WHEEL_VENV)/version.txt
	grep -q '^vramscope $(VERSION)' $(WHEEL_VENV)/version.txt && grep -q '^nvml: built in' $(WHEEL_VENV)/version.txt
	cd /tmp && $(WHEEL_VENV)/bin/vramscope demo --headless --steps 5 >/dev/null
	cd /tmp && $(WHEEL_VENV)/bin/python -c 'import vramscope, sys; assert vramscope.__file__.startswith("$(WHEEL_VENV)"), vramscope.__file__; assert vramscope.__version__ == "$(VERSION)"; print("wheel: import vramscope", vramscope.__version__, "from", vramscope.__file__)'
	cd /tmp && $(WHEEL_VENV)/bin/python -m vramscope version | grep -q '^protocol: v'
	cd /tmp && $(WHEEL_VENV)/bin/vramscope run --record $(WHEEL_VENV)/run.jsonl -- $(PYTHON) $(CURDIR)/testdata/run/train.py --steps 3
	$(WHEEL_VENV)/bin/vramscope report $(WHEEL_VENV)/run.jsonl | grep -q 'totals: 3 steps'
	cd /tmp && $(QEMU_ARM64) $(WHEEL_PICKS)/gh200-ubuntu-24.04-aarch64/vramscope/_bin/vramscope version | tee $(WHEEL_PICKS)/arm64-version.txt
	grep -q '^vramscope $(VERSION)' $(WHEEL_PICKS)/arm64-version.txt && grep -q '^go: .* linux/arm64' $(WHEEL_PICKS)/arm64-version.txt && grep -q '^nvml: built in' $(WHEEL_PICKS)/arm64-version.txt
	cd /tmp && $(QEMU_ARM64) $(WHEEL_PICKS)/gh200-ubuntu-24.04-aarch64/vramscope/_bin/vramscope demo --headless --steps 5 | tail -n 3
	cd /tmp && $(WHEEL_PICKS)/ubuntu-20.04-x86_64/vramscope/_bin/vramscope version | grep -q '^nvml: not built in'
	cd /tmp && $(WHEEL_PICKS)/ubuntu-20.04-x86_64/vramscope/_bin/vramscope demo --headless --steps 5 >/dev/null
	cd /tmp && $(QEMU_ARM64) $(WHEEL_PICKS)/rhel-8-aarch64/vramscope/_bin/vramscope version | grep -q '^go: .* linux/arm64'
	rm -rf $(WHEEL_VENV)
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install -q --no-index --no-deps $(WHEEL_DIR)/vramscope-$(VERSION)-py3-none-any.whl
	cd /tmp && $(WHEEL_VENV)/bin/python -c 'import vramscope; assert vramscope.__file__.startswith("$(WHEEL_VENV)"); assert vramscope.__version__ == "$(VERSION)"'
	cd /tmp && PATH=$(WHEEL_VENV)/bin:/usr/bin:/bin $(WHEEL_VENV)/bin/vramscope version 2>$(WHEEL_VENV)/err.txt; test $$? = 2
	grep -q 'carries no monitor binary' $(WHEEL_VENV)/err.txt
	rm -rf $(WHEEL_VENV) $(WHEEL_PICKS)
	@echo "check-wheels: passed"

# PyPA's auditwheel as a second opinion on the manylinux tags (the release
# runs it; it needs PyPI, which CI does not use).
AUDITWHEEL_VENV := $(CURDIR)/bin/auditwheel-venv
check-auditwheel:
	rm -rf $(AUDITWHEEL_VENV) && $(PYTHON) -m venv $(AUDITWHEEL_VENV)
	$(AUDITWHEEL_VENV)/bin/python -m pip install -q auditwheel==6.8.2
	$(PYTHON) packaging/wheelcheck.py $(WHEEL_DIR) --auditwheel $(AUDITWHEEL_VENV)/bin/auditwheel
	rm -rf $(AUDITWHEEL_VENV)

# The release workflow's guard: the tag it builds is the version the code
# carries (make check-tag TAG=v0.1.0).
check-tag:
	test "$(TAG)" = "v$(VERSION)" || { echo "tag $(TAG) is not v$(VERSION) (pyhook/vramscope/_version.py)"; exit 1; }

# `go install .` from a fresh clone stamps the commit into the version (a
# git worktree does not: Go finds no .git directory there). A source
# tarball and a -buildvcs=false build still name the release version.
INSTALL_CHECK := $(CURDIR)/bin/install-check
check-install:
	rm -rf $(INSTALL_CHECK)
	git clone -q --no-checkout $(CURDIR) $(INSTALL_CHECK)/src
	git -C $(INSTALL_CHECK)/src checkout -q $$(git rev-parse HEAD)
	cd $(INSTALL_CHECK)/src && GOFLAGS=-buildvcs=true GOBIN=$(INSTALL_CHECK)/bin go install .
	$(INSTALL_CHECK)/bin/vramscope version | tee $(INSTALL_CHECK)/version.txt
	grep -q "^revision: $$(git rev-parse HEAD)" $(INSTALL_CHECK)/version.txt
	# outside any checkout, or Go would stamp the enclosing repository's commit
	t=$$(mktemp -d) && git archive --format=tar HEAD | tar -x -C $$t && \
	  (cd $$t && go build -o $(INSTALL_CHECK)/tarball.bin .) && rm -rf $$t
	$(INSTALL_CHECK)/tarball.bin version | grep -qx 'vramscope $(VERSION)'
	cd $(CURDIR) && GOFLAGS=-buildvcs=false go build -o $(INSTALL_CHECK)/novcs.bin . && $(INSTALL_CHECK)/novcs.bin version | grep -qx 'vramscope $(VERSION)'
	rm -rf $(INSTALL_CHECK)
	@echo "check-install: passed"

bench: build
	go test -run '^$$' -bench . -benchmem ./...
	PYTHONPATH=$(CURDIR)/pyhook $(PYTHON) bench/hook_marker.py
	PYTHONPATH=$(CURDIR)/pyhook $(PYTHON) bench/step_overhead.py

demo: build
	$(BIN) demo

# The truth corpus's scorecard (bench/truth): kinds of realistic runs through
# the real hook on the simulated allocator, judged against the allocator's
# own figures. pyhook/tests/test_truth_corpus.py runs the same in make test.
truth: build
	$(PYTHON) bench/truth/scorecard.py --bin $(BIN)
