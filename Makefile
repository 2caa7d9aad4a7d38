# paddock — see README.md. Every target runs on a fresh Debian machine as root.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := /usr/local/go/bin:$(PATH):/var/cache/paddock/bin
GO ?= go
CLAUDE_BIN := /var/cache/paddock/cli/$(shell sed -n 's/^const PinnedVersion = "\(.*\)"/\1/p' internal/sessions/claudecode/claudecode.go)/node_modules/@anthropic-ai/claude-code/bin/claude.exe
FUZZTIME ?= 10s

.PHONY: all build deps lint test unit fuzz bench run install web clean

all: build

# Static (CGO_ENABLED=0). paddock-guest, the slim guest every box carries
# as its paddock, goes beside paddock, where the Runner looks for it.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/paddock ./cmd/paddock
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/paddock-guest ./cmd/paddock-guest

# Install what the tests and sessions need (Debian packages, the pinned
# Claude Code from npm, staticcheck); cached under /var/cache/paddock.
# GVISOR=1 also builds gVisor's runsc and registers it with dockerd (about
# 5 minutes the first time): `make test` sets it, and `make run` does when
# its ARGS ask for gvisor or runsc.
# DEPS_FOR=session (make run) installs only what a session needs: Docker
# too when DOCKER=1 (make run whose ARGS ask for the docker backend).
deps:
	PADDOCK_DEPS_FOR=$(DEPS_FOR) PADDOCK_DOCKER=$(DOCKER) PADDOCK_GVISOR=$(GVISOR) scripts/deps.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>&1); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	staticcheck ./...

# Unit tests only: no root, no integration components needed (they skip).
unit:
	$(GO) test -short ./...

# Every test, integration included, with the race detector; nothing may skip.
test: GVISOR = 1
test: deps lint build fuzz
	PADDOCK_REQUIRE_INTEGRATION=1 PADDOCK_CLAUDE_BIN=$(CLAUDE_BIN) $(GO) test -race -count=1 -timeout 30m ./...
	@# Alone, after the rest: it restarts dockerd, which stops every container.
	PADDOCK_DOCKER_RESTART=1 PADDOCK_REQUIRE_INTEGRATION=1 PADDOCK_CLAUDE_BIN=$(CLAUDE_BIN) $(GO) test -race -count=1 -timeout 5m -run '^TestDockerDaemonRestart$$' ./internal/testkit/e2e/

# A short run of every native fuzz target (the seed corpora run in `test` too).
# A fuzz run fails on a failing input. Go's fuzzer can also end with
# "context deadline exceeded" when -fuzztime runs out while it minimises a
# new interesting (not failing) input; that run found nothing and passes.
fuzz:
	@for t in $$(grep -rl --include='*_test.go' '^func Fuzz' internal); do \
	  pkg=./$$(dirname $$t); \
	  for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$t); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    if ! $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg >/tmp/paddock-fuzz.log 2>&1; then \
	      if ! grep -q 'Failing input written' /tmp/paddock-fuzz.log && grep -q '^    context deadline exceeded$$' /tmp/paddock-fuzz.log; then \
	        echo "  go's fuzzer hit its own deadline while minimising a new input; no failing input"; \
	      else cat /tmp/paddock-fuzz.log; exit 1; fi; \
	    fi; \
	  done; \
	done

# Side-by-side benchmarks; prints the tables recorded in docs/PERFORMANCE.md.
bench: deps build
	PADDOCK_CLAUDE_BIN=$(CLAUDE_BIN) $(GO) test -run "^$$" -bench . -benchtime 1x ./internal/proxy/credproxy/ ./internal/box/sandbox/sandboxbench/ ./internal/daemon/runner/ ./internal/testkit/e2e/ 2>&1 \
	  | grep -v -e '^ --->' -e '^Step ' -e '^Successfully' -e '^Removing intermediate'

# The main job: install what is needed, build, start the Runner if none
# answers, and run a Claude Code session attached to this terminal.
# Flags for `paddock run` go in ARGS, e.g. make run ARGS="--backend docker".
run: GVISOR := $(if $(findstring gvisor,$(ARGS))$(findstring runsc,$(ARGS)),1,$(GVISOR))
run: DOCKER := $(if $(findstring docker,$(ARGS)),1,$(DOCKER))
run: DEPS_FOR := session
run: deps build
	scripts/run.sh $(ARGS)

# Front-end assets: installed exactly as web/package-lock.json says, then the
# built files copied where go:embed takes them (committed, so a Go build
# needs no npm).
web:
	cd web && npm ci --no-audit --no-fund --ignore-scripts
	cp web/node_modules/@xterm/xterm/lib/xterm.js web/node_modules/@xterm/xterm/css/xterm.css \
	   web/node_modules/@xterm/addon-fit/lib/addon-fit.js internal/daemon/web/static/vendor/

# Put paddock on PATH, and its systemd unit where systemd looks for local
# units (docs/SERVICE.md). Enabling the unit is the owner's to do.
# DESTDIR installs into a staging root.
DESTDIR ?=
install: build
	install -D -m 0755 bin/paddock $(DESTDIR)/usr/local/bin/paddock
	install -D -m 0755 bin/paddock-guest $(DESTDIR)/usr/local/bin/paddock-guest
	install -D -m 0644 contrib/systemd/paddock.service $(DESTDIR)/usr/local/lib/systemd/system/paddock.service
	install -D -m 0644 docs/SERVICE.md $(DESTDIR)/usr/local/share/doc/paddock/SERVICE.md
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
	  systemctl daemon-reload; \
	  echo "installed; start the Runner at boot with: sudo systemctl enable --now paddock"; \
	  echo "(after an upgrade: sudo systemctl restart paddock; sessions keep running)"; \
	else \
	  echo "installed $(DESTDIR)/usr/local/bin/paddock and the systemd unit paddock.service"; \
	  [ -n "$(DESTDIR)" ] || echo "systemd is not running here: start the Runner with paddock serve (docs/SERVICE.md)"; \
	fi

clean:
	rm -rf bin
