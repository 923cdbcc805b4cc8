# pisess — the one place that says how to build, test and check.
# Checking targets never modify the tree.

export GOFLAGS := -mod=mod

GO          ?= go
BIN         := bin/pisess
# staticcheck is run at a pinned version through the Go module proxy, so no
# install step is needed and every machine runs the same checks.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 20s
PI_DIR      := scripts/pi

.PHONY: build test lint check bench demo fuzz crash npm-deps man

build:
	$(GO) build -o $(BIN) .

# The one test command (README, .ci/run): every test, then the crash
# harness, whose failpoints SIGKILL child processes at named steps (they
# are compiled in only with -tags failpoints). The harness runs for minutes
# without output of its own: scripts/testprogress prints each test as it
# starts and ends, a heartbeat while one runs long, and a failed test's
# whole output. Everything the tests read is in the repository (fixtures/).
test: npm-deps
	$(GO) test ./...
	@echo "crash harness: $(GO) test -tags failpoints -run Crash ./... (children SIGKILLed at every failpoint)"
	$(GO) run ./scripts/testprogress $(GO) test -json -timeout 30m -tags failpoints -run Crash ./...

# Interop tests drive the real TypeScript pi; install its pinned packages
# once (only when the lock file exists and node_modules does not).
npm-deps:
	@if [ -f $(PI_DIR)/package-lock.json ] && [ ! -d $(PI_DIR)/node_modules ]; then \
		npm ci --prefix $(PI_DIR); \
	fi

lint:
	@out="$$(find . -name '*.go' -not -path './.git/*' -not -path '*/node_modules/*' -print0 | xargs -0 gofmt -l)"; \
	if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

check: lint npm-deps
	$(GO) test -race ./...

bench:
	scripts/bench

# The man page, generated from the command definitions (pisess man).
man: build
	$(BIN) man > bin/pisess.1

demo: build
	scripts/demo

# go test -fuzz takes one target per run: loop over every Fuzz function.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

# Crash harness: failpoints become real SIGKILLs in this build.
crash:
	$(GO) test -tags failpoints ./...
