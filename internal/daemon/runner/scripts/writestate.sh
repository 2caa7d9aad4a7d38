# writestate.sh: unpacks Claude Code's state into the box, for an import
# or a resumed host conversation (writeBoxState, portable.go). The tar
# stream is paddock's own (portable.WriteBoxTar, every path checked).
#
# Arguments: $1 Claude Code's config directory, made if missing.
# Stdin: the tar stream.
# Exit status: tar's: 0 once every file is written.
mkdir -p "$1" && cd "$1" && exec tar -x -f - --no-same-owner
