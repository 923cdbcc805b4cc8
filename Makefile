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

# The platforms besides Linux that pisess supports (README, Platforms):
# `make cross` builds and vets each (tests and failpoints included), and
# checks that a Windows build stops at its one message.
CROSS       := darwin/amd64 darwin/arm64 freebsd/amd64

.PHONY: build test lint check bench demo fuzz crash npm-deps man cross

build:
	$(GO) build -o $(BIN) .

# The one test command (README, .ci/run): the other platforms' builds,
# every test, then the crash harness, whose failpoints SIGKILL child
# processes at named steps (they are compiled in only with -tags
# failpoints); then the tests again with -tags portable, crash harness
# included, which run on Linux the platform code macOS and FreeBSD run
# (writers/durable/sys.go).
test: npm-deps cross
	$(GO) test ./...
	$(GO) test -timeout 30m -tags failpoints -run Crash ./...
	$(GO) test -tags portable ./...
	$(GO) test -timeout 30m -tags 'failpoints portable' -run Crash ./...

cross:
	@set -e; for p in $(CROSS); do \
		echo "== $$p: build, vet"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -o /dev/null .; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet ./...; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet -tags failpoints ./...; \
	done
	@out="$$(GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null . 2>&1)"; \
	if printf '%s' "$$out" | grep -q 'Windows_is_not_supported'; then \
		echo "== windows/amd64: stops at unsupported_windows.go, as intended"; \
	else \
		echo "windows/amd64: the build must stop at unsupported_windows.go; it said:"; echo "$$out"; exit 1; \
	fi

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
