#!/usr/bin/env bash
# Installs what paddock's tests and sessions need on a Debian machine, and
# caches what it builds so a second run takes seconds:
#   - Debian packages (apt-get; only the missing ones, one apt-get update):
#     bubblewrap and tmux (the local backend), docker.io (the docker
#     backend), debootstrap (the base `paddock image build` makes), chromium (the web page test),
#     nginx-light (the reference proxy in the benchmark), docker-registry (a
#     registry on loopback, to pull a base by digest in a test; no service is started),
#     systemd (systemd-analyze checks the unit file), etcd-server,
#     etcd-client and containernetworking-plugins (the Kubernetes test
#     cluster; its containerd, ctr and runc come with docker.io), strace
#     (the test that lists what git reads from a git directory)
#   - Go at go.mod's version in /usr/local/go, when it is not there
#   - dockerd, started if it does not answer
#   - the pinned Claude Code CLI from npm into /var/cache/paddock/cli/<version>
#   (the box image's base is made by paddock itself, as users get it: the
#   tests build the image with `paddock image build`'s code, which keeps
#   the debootstrapped tree in /var/cache/paddock/rootfs-<suite>-<recipe>)
#   - with PADDOCK_GVISOR=1 (make test; make deps GVISOR=1): gVisor's runsc
#     (scripts/gvisor-bin.sh) into /var/cache/paddock/gvisor/<version>,
#     registered as dockerd's runtime "runsc": about 5 minutes the first time
#   - staticcheck into /var/cache/paddock/bin
#   - kube-apiserver, kube-controller-manager, kube-scheduler and kubelet
#     (scripts/k8s-bins.sh) into /var/cache/paddock/k8s/<version>/bin:
#     10-14 minutes the first time, nothing after
# With PADDOCK_DEPS_FOR=session (make run) only what a session needs:
# bubblewrap, tmux, git, gh, Node.js and npm when missing, Go, the pinned
# Claude Code; Docker (docker.io, debootstrap, dockerd started) only with
# PADDOCK_DOCKER=1 (make run whose ARGS ask for the docker backend), runsc
# only with PADDOCK_GVISOR=1; no test tool, no Kubernetes binary.
# Usage: scripts/deps.sh [--no-apt]
set -euo pipefail
session=$([ "${PADDOCK_DEPS_FOR:-}" = session ] && echo 1 || true)
docker=$([ -z "$session" ] || [ "${PADDOCK_DOCKER:-}" = 1 ] && echo 1 || true)

CLAUDE_VERSION=$(sed -n 's/^const PinnedVersion = "\(.*\)"/\1/p' internal/sessions/claudecode/claudecode.go)
STATICCHECK_VERSION=v0.8.2
CACHE=/var/cache/paddock
export PATH="/usr/local/go/bin:$PATH:$CACHE/bin"

say() { printf '\033[1mdeps:\033[0m %s\n' "$*"; }

# Debian packages (gh: pull requests from local boxes through a grant;
# systemd: for systemd-analyze, which checks the unit
# file; etcd and the CNI plugins: the Kubernetes test cluster, which runs
# docker.io's containerd and runc). Node.js and npm: only when missing (a
# newer node from elsewhere is kept).
pkgs=(ca-certificates git gh make util-linux bubblewrap tmux perl procps iproute2)
[ -z "$docker" ] || pkgs+=(docker.io debootstrap)
[ -n "$session" ] || pkgs+=(chromium nginx-light systemd docker-registry etcd-server etcd-client containernetworking-plugins strace)
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
# Go: go.mod's version. Without it, Debian's Go is installed only to fetch
# that toolchain (below).
GO_VERSION=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)
have_go() { command -v go >/dev/null 2>&1 && [ "$(go env GOVERSION 2>/dev/null)" = "go$GO_VERSION" ]; }
# (The versioned package: it puts no older `go` on PATH.)
bootstrap_go() { ls /usr/lib/go-1.*/bin/go 2>/dev/null | sort -V | tail -n 1; }
have_go || [ -n "$(bootstrap_go)" ] || pkgs+=(golang-1.19-go)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${1:-}" != "--no-apt" ] && [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    say "missing Debian packages: ${missing[*]}; run as root (sudo make deps) or install them"; exit 1
  fi
  say "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # No package starts a service: nginx would listen on :80 (the benchmark
  # runs its own on loopback), and dockerd is started below with our checks.
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { [ -z "$policy" ] || rm -f "$policy"; exit 1; }
  [ -z "$policy" ] || rm -f "$policy"
fi

# The Go toolchain, when go.mod's version is not on PATH: fetched as the
# module golang.org/toolchain from the Go module proxy and checked against
# the checksum database — what `go` itself does when it switches
# toolchains — using Debian's older Go, then installed as /usr/local/go.
if ! have_go; then
  [ "$(id -u)" -eq 0 ] || { say "Go $GO_VERSION is missing; run as root (sudo make deps) or install it at /usr/local/go"; exit 1; }
  arch=$(dpkg --print-architecture)
  mod="golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-$arch"
  say "fetching Go $GO_VERSION ($mod) from the Go module proxy"
  tmp=$(mktemp -d)
  # (From $tmp: outside this module, whose go.mod the old Go cannot read.)
  src=$(cd "$tmp" && env -i PATH=/usr/bin:/bin HOME="$tmp" GOPATH="$tmp" GOFLAGS=-modcacherw \
    GOPROXY="${GOPROXY:-https://proxy.golang.org}" GOSUMDB="${GOSUMDB:-sum.golang.org}" \
    "$(bootstrap_go)" mod download -json "$mod" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -n "$src" ] && [ -f "$src/bin/go" ] || { rm -rf "$tmp"; say "could not fetch $mod"; exit 1; }
  rm -rf /usr/local/go.new && cp -r "$src" /usr/local/go.new
  chmod +x /usr/local/go.new/bin/* /usr/local/go.new/pkg/tool/*/*  # a module zip keeps no modes
  rm -rf "$tmp" /usr/local/go && mv /usr/local/go.new /usr/local/go
  have_go || { say "/usr/local/go does not report go$GO_VERSION"; exit 1; }
fi

mkdir -p "$CACHE/bin" "$CACHE/cli"

# The pinned Claude Code, verified by its own --version.
dir="$CACHE/cli/$CLAUDE_VERSION"
bin="$dir/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "^$CLAUDE_VERSION "; then
  say "claude $CLAUDE_VERSION cached in $dir"
else
  say "npm install @anthropic-ai/claude-code@$CLAUDE_VERSION into $dir"
  rm -rf "$dir" && mkdir -p "$dir"
  npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "@anthropic-ai/claude-code@$CLAUDE_VERSION" >/dev/null
  "$bin" --version | grep -q "^$CLAUDE_VERSION " || { say "claude --version does not report $CLAUDE_VERSION"; exit 1; }
fi

# gVisor's runsc, pinned and built from the Go module proxy (cached), and
# registered with dockerd as the runtime "runsc" in /etc/docker/daemon.json
# with runtimes.GVisorArgs (--directfs=false: see its doc) (merged: other
# keys and runtimes are kept). A running dockerd whose runsc differs
# reloads its runtimes on SIGHUP; one that dockerd started with
# --add-runtime flags would refuse a daemon.json runtimes key, so a daemon
# configured that way is left alone and the runsc tests say what is missing.
if [ "${PADDOCK_GVISOR:-}" = 1 ]; then
scripts/gvisor-bin.sh
RUNSC=$CACHE/gvisor/$(sed -n 's/^const GVisorVersion = "\(v[0-9a-f.-]*\)"$/\1/p' internal/box/runtimes/runtimes.go)/runsc
if [ "$(id -u)" -eq 0 ] && [ -n "$docker" ]; then
  mkdir -p /etc/docker
  RUNSC="$RUNSC" perl -MJSON::PP -e '
    my $f = "/etc/docker/daemon.json"; my $c = {};
    if (-s $f) { local $/; open my $h, "<", $f or die "$f: $!\n"; $c = decode_json(<$h>); }
    my $r = $c->{runtimes}{runsc} // {};
    exit 0 if ($r->{path} // "") eq $ENV{RUNSC} && join(" ", @{$r->{runtimeArgs} // []}) eq "--directfs=false";
    $c->{runtimes}{runsc} = { path => $ENV{RUNSC}, runtimeArgs => ["--directfs=false"] };
    open my $o, ">", "$f.new" or die "$f.new: $!\n";
    print $o JSON::PP->new->pretty->canonical->encode($c); close $o;
    rename "$f.new", $f or die "$f: $!\n";
    print STDERR "\033[1mdeps:\033[0m runsc registered in $f\n";'
  if docker info >/dev/null 2>&1 && ! docker info --format '{{json .Runtimes.runsc}}' | grep -qF '"runtimeArgs":["--directfs=false"]'; then
    say "dockerd reloads its runtimes (SIGHUP)"
    pkill -HUP -x dockerd || true
    for _ in $(seq 1 20); do docker info --format '{{json .Runtimes.runsc}}' | grep -qF -- '--directfs=false' && break; sleep 0.25; done
  fi
fi
fi

# dockerd: start it when it does not answer (a fresh machine, or CI).
if [ -n "$docker" ] && ! docker info >/dev/null 2>&1; then
  say "starting dockerd (log: /var/log/paddock-dockerd.log)"
  setsid nohup dockerd >/var/log/paddock-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { say "dockerd did not start; see /var/log/paddock-dockerd.log"; exit 1; }
fi
[ "${PADDOCK_GVISOR:-}" != 1 ] || [ -z "$docker" ] || docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' \
  || say "dockerd has no runtime runsc: add {\"runtimes\": {\"runsc\": {\"path\": \"$RUNSC\", \"runtimeArgs\": [\"--directfs=false\"]}}} to its daemon.json and reload it (the runsc tests will fail)"

if [ -n "$session" ]; then
  say "ready for a session$([ -n "$docker" ] && echo ', the docker backend too' || true); the tests' own tools come with make deps"
  exit 0
fi

# staticcheck, pinned.
if ! "$CACHE/bin/staticcheck" -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
  say "go install staticcheck@$STATICCHECK_VERSION"
  GOBIN="$CACHE/bin" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
# The Kubernetes test cluster's binaries (cached by version), and the
# containerd client it imports images with.
command -v ctr >/dev/null 2>&1 || { say "ctr is missing (it comes with containerd, a dependency of docker.io)"; exit 1; }
scripts/k8s-bins.sh
say "ready"
