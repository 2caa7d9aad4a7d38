# launch.sh: writes Claude Code's config files, replaces any running tmux
# server whole (it holds the old environment) and starts tmux with claude.
# Run in the box as the box user by launch (start.go), with claude's
# environment (the credential too) in its own.
#
# Arguments: $1 Claude Code's config directory; $2 the conversation's
#   transcript; $3 the config files to keep aside as <name>.invalid and
#   $4 those to write (each a space-separated list: no path has a space);
#   $5 tmux's socket name (tmux -L) and $6 the socket's path; $7 the file
#   where the last claude's exit status was left; the rest: the command
#   that starts tmux with claude. A transcript with a user message in it
#   is resumed (its --session-id becomes --resume); one without is kept
#   aside as <transcript>.unresumable, and the conversation starts anew.
# Stdin: the files of $4, NUL-separated, for `paddock guest put`.
# Exit status: that of the tmux command, which it execs; not 0 if a step
#   before it failed (set -e).
#
# Each external command here is a process in the box (2–3 ms on a small
# VM): the builtin tests skip those with nothing to do.
set -e
cfg=$1 tx=$2 aside=$3 write=$4 sock=$5 sockpath=$6 exitfile=$7; shift 7
[ -d "$cfg" ] && [ -d "$CLAUDE_CODE_TMPDIR" ] || mkdir -p "$cfg" "$CLAUDE_CODE_TMPDIR"
for f in $aside; do mv -f "$f" "$f.invalid" || true; done
if [ -n "$write" ]; then paddock guest put $write; fi  # stdin: those files, NUL-separated
# An old server (set, re-adoption) goes first, and fully: a client that
# reaches a server in its shutdown fails with "server exited unexpectedly";
# and its claude, which may write the transcript as it exits, goes too.
old_claude() {  # a process other than this shell with claude's flag in its argv
  for p in /proc/[0-9]*; do
    [ "$p" != /proc/$$ ] && grep -qsxzF -e --dangerously-skip-permissions "$p/cmdline" && return 0
  done
  return 1
}
if [ -S "$sockpath" ] && tmux -L "$sock" kill-server 2>/dev/null; then
  i=0; while { tmux -L "$sock" has-session 2>/dev/null || old_claude; } && [ $i -lt 250 ]; do sleep 0.02; i=$((i+1)); done
  sleep 0.05
fi
[ ! -e "$exitfile" ] || rm -f "$exitfile"  # the last claude's end, if any: not this one's
if [ -e "$tx" ]; then
  if grep -qs '"type":"user"' "$tx"; then
    for a do shift; [ "$a" = --session-id ] && a=--resume; set -- "$@" "$a"; done
  else
    mv -f "$tx" "$tx.unresumable"
  fi
fi
exec "$@"
