# readstate.sh: writes what travels of Claude Code's state in the box as
# a tar stream, for an export (readBoxState, portable.go).
#
# Arguments: $1 Claude Code's config directory; $2 a file name never
#   read (the credential); the rest: the names under $1 that travel (a
#   missing one is left out).
# Stdin: none.
# Output: a POSIX tar of those names, read relative to $1; nothing when
#   $1 or all of them are missing.
# Exit status: 0, or 1 when GNU tar saw a file change as it read it
#   (claude writing; the stream is whole but for that file's end); more
#   is tar's failure.
cd "$1" 2>/dev/null || exit 0
exclude=$2
shift 2
set -- $(for f in "$@"; do if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi; done)
[ $# -gt 0 ] || exit 0
tar -c -f - --format=posix --exclude="$exclude" -- "$@" 2>/dev/null
rc=$?; [ $rc -le 1 ] || exit $rc
