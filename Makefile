# vramscope's build and test entry points. `make test` is the test command
# the README and CI use.

PYTHON ?= /usr/bin/python3
BIN    := $(CURDIR)/bin/vramscope
export CGO_ENABLED := 1
# go-nvml's C headers warn about deprecated declarations; they are harmless.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build test test-go test-race test-py check-pkg bench vet demo

all: build

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build:
	go build -ldflags "-X main.version=$(VERSION)" -o $(BIN) .

vet:
	go vet ./...

test-go: build
	VRAMSCOPE_BIN=$(BIN) go test ./...

# The hook's tests run under the system Python, which carries Debian's torch.
# Without pytest they are skipped loudly, unless VRAMSCOPE_REQUIRE_TORCH=1
# (set by CI), which makes a missing test stack a failure.
test-py: build
	@if $(PYTHON) -c 'import pytest' 2>/dev/null; then \
		cd pyhook && VRAMSCOPE_BIN=$(BIN) PYTHONPATH=$(CURDIR)/pyhook $(PYTHON) -m pytest -q -p no:cacheprovider tests; \
	elif [ "$$VRAMSCOPE_REQUIRE_TORCH" = 1 ]; then \
		echo "FAIL: $(PYTHON) has no pytest (apt-get install python3-pytest python3-torch)"; exit 1; \
	else \
		echo "!!!! SKIPPED the pyhook tests: $(PYTHON) has no pytest (apt-get install python3-pytest python3-torch) !!!!"; \
	fi

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

bench: build
	go test -run '^$$' -bench . -benchmem ./...
	PYTHONPATH=$(CURDIR)/pyhook $(PYTHON) bench/hook_marker.py
	PYTHONPATH=$(CURDIR)/pyhook $(PYTHON) bench/step_overhead.py

demo: build
	$(BIN) demo
