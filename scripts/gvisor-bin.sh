#!/usr/bin/env bash
# Builds gVisor's runsc, the runtime of the `runsc` boxes (docs/BACKENDS.md
# "Runtimes"), from the Go module proxy at the pinned pseudo-version
# (internal/box/runtimes GVisorVersion) into
#   /var/cache/paddock/gvisor/<version>/runsc
# in a module directory of its own beside it (…/src, outside the clone).
# Not Debian's runsc: its 2022 build fails statx on Debian 12's coreutils
# and has no systrap platform (../shared/gvisor-on-these-machines.md).
# Skipped when the binary is there and reports the version: warm cost 0.
# Cold: about 5 minutes.
# Usage: scripts/gvisor-bin.sh   (prints nothing but progress; the path is
# runtimes.RunscPath)
set -euo pipefail

VERSION=$(sed -n 's/^const GVisorVersion = "\(v[0-9a-f.-]*\)"$/\1/p' "$(dirname "$0")/../internal/box/runtimes/runtimes.go")
[ -n "$VERSION" ] || { echo "gvisor-bin: no GVisorVersion in internal/box/runtimes/runtimes.go" >&2; exit 1; }
DIR=/var/cache/paddock/gvisor/$VERSION
export PATH="/usr/local/go/bin:$PATH"

say() { printf '\033[1mgvisor-bin:\033[0m %s\n' "$*"; }
# reports: runsc at $1 says it is $VERSION. (Its output read whole first:
# grep -q in a pipe may exit before runsc writes its second line, and with
# pipefail runsc's SIGPIPE would fail the check.)
reports() { local v; v=$("$1" --version 2>/dev/null) || return 1; grep -qx "runsc version $VERSION" <<<"$v"; }

if reports "$DIR/runsc"; then
  say "runsc $VERSION cached in $DIR"
  exit 0
fi
say "building runsc $VERSION into $DIR (cold: about 5 minutes)"
mkdir -p "$DIR/src"
cd "$DIR/src"
[ -f go.mod ] || go mod init paddock.local/gvisor-bin >/dev/null 2>&1
export GOFLAGS=-mod=mod CGO_ENABLED=0
go get "gvisor.dev/gvisor@$VERSION"
go build -trimpath -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$VERSION" -o "$DIR/runsc.new" gvisor.dev/gvisor/runsc
mv "$DIR/runsc.new" "$DIR/runsc"
reports "$DIR/runsc" || { say "runsc --version does not report $VERSION"; exit 1; }
say "runsc $VERSION built"
