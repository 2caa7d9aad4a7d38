# writefile.sh: writes stdin to a file in the box, making its directory.
# Used for the Runner's CA certificate when the guest is too old to put
# files itself (putConfig, start.go).
#
# Arguments: $1 the file.
# Stdin: its contents.
# Exit status: 0 once written; not 0 if the directory or the file could
#   not be made.
mkdir -p "$(dirname "$1")" && cat > "$1"
