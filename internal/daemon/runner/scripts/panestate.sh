# panestate.sh: tells whether claude's tmux pane is dead, and how, for
# the Runner's look at it (checkPane, pane.go): tmux's view, a mark line,
# then what exitwrap.sh recorded (tmux 3.3 can lose how a pane died, the
# wrapper cannot).
#
# Arguments: $1 the tmux socket name; $2 the tmux session; $3 the mark
#   line; $4 the file exitwrap.sh writes.
# Stdin: none.
# Output: tmux's `#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}|#{pane_pid}`
#   (or its error), the mark line, up to 16 bytes of $4.
# Exit status: tmux's.
tmux -L "$1" display-message -p -t "$2" '#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}|#{pane_pid}' 2>&1; c=$?
echo "$3"; head -c 16 "$4" 2>/dev/null; exit $c
