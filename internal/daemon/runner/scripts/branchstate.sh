# branchstate.sh: tells where a clone session's branch is, for paddock
# fetch (FetchSession, clone.go): its commit, how many commits it has
# beyond the base, and whether the working tree has changes not committed.
#
# Arguments: $1 the workspace; $2 the branch; $3 the base commit.
# Stdin: none.
# Output: three lines: the branch's commit; the count of commits on it
#   not in the base; "dirty" or "clean".
# Exit status: 0, or git's when the branch is gone.
#
# What the clone's own config makes git say or run (an fsmonitor, hooks)
# is the box's business, but not in these three lines: git here runs with
# neither, and its warnings go to stderr only.
set -e
cd "$1"
git() { command git -c core.fsmonitor=false -c core.hooksPath=/dev/null "$@" 2>/dev/null; }
git rev-parse --verify --quiet "refs/heads/$2^{commit}"
git rev-list --count "refs/heads/$2" "^$3"
if [ -n "$(git status --porcelain | head -c 1)" ]; then echo dirty; else echo clean; fi
