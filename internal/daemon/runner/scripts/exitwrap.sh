# exitwrap.sh: runs claude in its tmux pane as a child, not by exec, so
# that its exit status, a signal's included (128+n), is written down before
# the pane dies, and the guest told at once (exitWrap, pane.go).
#
# Arguments: $1 the file its exit status goes to; $2 and on, claude's
#   command line.
# Stdin: the pane's terminal, passed on to claude.
# Exit status: claude's.
f=$1; shift
rm -f "$f"; "$@"; s=$?; echo "$s" > "$f"; paddock guest hook pane-died </dev/null >/dev/null 2>&1; exit "$s"
