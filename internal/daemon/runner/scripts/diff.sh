# diff.sh: prints a clone session's change against its base as git diff
# does (DiffSession, clone.go): what it committed, what it has not, and
# (with -A) the files git does not track yet, all in one diff. For those a
# copy of the index takes the untracked files (git add -A), so the
# session's own index and working tree stay as they are; without them
# (-u) git compares the working tree with the base at once, no copy.
#
# Each git diff here reads every file's status once: the costly part in a
# large tree, so the Runner asks for one diff when it can (--numstat -z
# gives it both the names and the stat).
#
# Arguments: $1 the workspace; $2 the base commit; $3 -A (with the files
#   git does not track) or -u (tracked files only: no search for new
#   files); $4 names (first the changed files' names) or only (no
#   names); $5 and on, git diff's options (--numstat -z, --color=...).
# Stdin: none.
# Output: with names, the changed files' names (git diff --name-only -z),
#   after a line with their length in bytes; then the diff.
# Exit status: 0, or git's when it fails.
set -e
cd "$1"
base=$2 add=$3 names=$4
shift 4
cached=
if [ "$add" = -A ]; then
	idx=$(mktemp /tmp/paddock-diff-index.XXXXXX)
	trap 'rm -f "$idx"' EXIT
	if [ -f .git/index ]; then cp .git/index "$idx"; else rm -f "$idx"; fi
	GIT_INDEX_FILE=$idx git add -A
	export GIT_INDEX_FILE="$idx"
	cached=--cached
fi
if [ "$names" = names ]; then
	list=$(mktemp /tmp/paddock-diff-names.XXXXXX)
	trap 'rm -f "$list" ${idx:+"$idx"}' EXIT
	git diff $cached --no-ext-diff --name-only -z "$base" -- >"$list"
	wc -c <"$list"
	cat "$list"
fi
git -c core.pager=cat diff $cached --no-ext-diff "$@" "$base" --
