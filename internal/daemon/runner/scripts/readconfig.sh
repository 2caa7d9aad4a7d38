# readconfig.sh: prints Claude Code's two config files in the box, for
# launch to seed (readBoxConfig, start.go). Only a regular file is read:
# a missing one, a FIFO or a device there prints nothing.
#
# Arguments: $1 .claude.json; $2 settings.json; $3 the most bytes printed
#   of each.
# Stdin: none.
# Output: $1's bytes, a NUL, $2's bytes (valid JSON holds no NUL).
# Exit status: 0.
max=$3
r() { if [ -f "$1" ]; then head -c "$max" "$1" 2>/dev/null; fi; }
r "$1"; printf '\0'; r "$2"; true
