# diff.sh: prints a clone session's change against its base as git diff
# does (DiffSession, clone.go): what it committed, what it has not, and
# the files git does not track yet, all in one diff. A copy of the index
# takes the untracked files (git add -A), so the session's own index and
# working tree stay as they are.
#
# Arguments: $1 the workspace; $2 the base commit; $3 -A (with the files
#   git does not track) or -u (tracked files only: no search for new
#   files, the costly part in a large tree); $4 and on, git diff's options
#   (--stat, --name-only, --color=...).
# Stdin: none.
# Output: the changed files' names (git diff --name-only -z), after a
#   line with their length in bytes; then the diff.
# Exit status: 0, or git's when it fails.
set -e
cd "$1"
base=$2 add=$3
shift 3
idx=$(mktemp /tmp/paddock-diff-index.XXXXXX)
names=$(mktemp /tmp/paddock-diff-names.XXXXXX)
trap 'rm -f "$idx" "$names"' EXIT
if [ -f .git/index ]; then cp .git/index "$idx"; else rm -f "$idx"; fi
GIT_INDEX_FILE=$idx git add "$add"
GIT_INDEX_FILE=$idx git diff --cached --no-ext-diff --name-only -z "$base" -- >"$names"
wc -c <"$names"
cat "$names"
GIT_INDEX_FILE=$idx git -c core.pager=cat diff --cached --no-ext-diff "$@" "$base" --
