# transcript.sh: prints the end of a session's transcript and its
# subagents', for the ledger (readTranscript, ledger.go).
#
# Arguments: $1 the transcript; $2 the directory of its subagents'
#   transcripts (*.jsonl); $3 how many bytes of the end to print.
# Stdin: none.
# Output: the main transcript, then each subagent's, each ending in a
#   newline (a missing one is left out); of all that, the last $3 bytes.
# Exit status: tail's: 0 unless the output could not be written.
for f in "$1" "$2"/*.jsonl; do if [ -f "$f" ]; then cat -- "$f"; echo; fi; done 2>/dev/null | tail -c "$3"
