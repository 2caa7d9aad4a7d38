#!/usr/bin/env bash
# The main job: a sandboxed Claude Code session, from a fresh Debian machine.
#   sudo make run                 # or: scripts/run.sh [paddock run flags…]
# It installs what is missing (scripts/deps.sh), builds paddock, starts the
# Runner (`paddock serve`, log in <state-dir>/serve.log) unless one already
# answers, asks for your credential if none is stored, and runs a session
# attached to your terminal (detach with ctrl-p ctrl-q; paddock attach NAME
# to come back).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

bin=bin/paddock
state="${PADDOCK_STATE_DIR:-/var/lib/paddock}"
export PADDOCK_STATE_DIR="$state"

# Whether a credential is stored, or one `paddock serve` would take from
# this environment. The status is read whole, not piped into `grep -q`:
# under pipefail, grep's early exit could end paddock with SIGPIPE before its
# last line and make "no credential" look like a credential.
need_credential() {
  local out
  out=$("$bin" credential status 2>/dev/null) || return 0
  [[ "$out" == "no credential"* ]]
}
if need_credential; then
  if [ -z "${CLAUDE_CODE_OAUTH_TOKEN:-}${ANTHROPIC_API_KEY:-}${ANTHROPIC_AUTH_TOKEN:-}" ]; then
    echo "paddock needs your Anthropic credential (kept outside every box)."
    echo "Run 'claude setup-token' elsewhere for a long-lived token, or use an API key."
    "$bin" credential set
  fi
fi

if ! "$bin" ls >/dev/null 2>&1; then
  mkdir -p "$state"
  # The Runner's log is the owner's alone (0600), like all of the state
  # directory; the web page's login is never in it (`paddock web`).
  ( umask 077; : >>"$state/serve.log" ); chmod 600 "$state/serve.log"
  echo "starting the Runner: $bin serve (log: $state/serve.log)"
  setsid nohup "$bin" serve >>"$state/serve.log" 2>&1 </dev/null &
  for _ in $(seq 1 100); do "$bin" ls >/dev/null 2>&1 && break; sleep 0.1; done
  "$bin" ls >/dev/null 2>&1 || { echo "the Runner did not start; see $state/serve.log"; tail -n 20 "$state/serve.log"; exit 1; }
fi

# The docker backend needs its image: built (about a minute the first
# time, seconds after: everything is reused) when the session asks for it.
prev=""
for a in "$@"; do
  if [ "$a" = "--backend=docker" ] || { [ "$prev" = "--backend" ] && [ "$a" = "docker" ]; }; then
    echo "the docker backend: $bin image build"
    "$bin" image build >/dev/null
  fi
  prev="$a"
done

echo "web page: \`sudo $bin web\` prints a one-time login URL"
exec "$bin" run "$@"
