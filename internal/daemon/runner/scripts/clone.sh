# clone.sh: makes a clone session's working copy at its first start
# (setupClone, clone.go): a repository of its own at the workspace, on
# the session's branch at the base commit, its history borrowed from the
# host repository's git directory, which the box sees read-only
# (objects/info/alternates), so only the checkout is copied. A fresh
# repository: nothing of the host's config, hooks or info/ comes in.
# Its remote origin is that read-only view.
#
# Arguments: $1 the host repository's git directory in the box
#   (sandbox.OriginDir); $2 the base commit; $3 the branch; $4 the
#   workspace.
# Stdin: none.
# Exit status: 0 when the clone is there, made now or at an earlier
#   start; git's when a step fails.
#
# A checkout cut short (a large repository, a start that timed out) is
# finished at the next start: .git/paddock-clone-incomplete marks one
# until its checkout is whole. Nothing of the session's runs before it is.
set -e
origin=$1 base=$2 branch=$3
cd "$4"
if [ ! -e .git ]; then
	git init -q -b "$branch" .
	: > .git/paddock-clone-incomplete
	printf '%s\n' "$origin/objects" > .git/objects/info/alternates
	git update-ref "refs/heads/$branch" "$base"
	git remote add origin "$origin"
elif [ ! -e .git/paddock-clone-incomplete ]; then
	exit 0
fi
git reset -q --hard
rm -f .git/paddock-clone-incomplete
