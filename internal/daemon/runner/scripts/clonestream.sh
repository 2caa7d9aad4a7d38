# clonestream.sh: makes a clone session's working copy at its first start
# in a box that cannot see the host repository (Capabilities.StreamedClone,
# the kubernetes backend; setupClone, clone.go): a repository of its own
# at the workspace, on the session's branch at the base commit, its
# history from a pack of the base the Runner made on the host and streams
# in. A fresh repository: nothing of the host's config, hooks or info/.
#
# Arguments: $1 the step: state (print done, checkout or pack: what the
#   clone still needs), pack (make it from the pack on stdin) or checkout
#   (finish a checkout cut short); $2 the workspace; $3 the base commit;
#   $4 the branch.
# Stdin: the pack, for pack; none else.
# Exit status: 0 when the step is done; git's when one of its steps fails.
#
# .git/paddock-clone-incomplete marks a clone until its checkout is
# whole; a pack cut short leaves no object of it (index-pack writes the
# pack whole or not at all), so state says pack again.
set -e
step=$1 base=$3 branch=$4
# A claim's root is not the box user's own (its group is), and git works
# in no repository another user owns unless told: this one, the box's
# own, is named in the box user's git config (the XDG one, which the
# ~/.gitconfig paddock writes at the first start leaves alone).
xdg=$HOME/.config/git/config
if ! git config --file "$xdg" --get-all safe.directory 2>/dev/null | grep -qx "$2"; then
	mkdir -p "${xdg%/*}"
	git config --file "$xdg" --add safe.directory "$2"
fi
cd "$2"
case $step in
state)
	if [ -e .git ] && [ ! -e .git/paddock-clone-incomplete ]; then
		echo done
	elif [ -e .git ] && git cat-file -e "$base^{commit}" 2>/dev/null; then
		echo checkout
	else
		echo pack
	fi
	;;
pack)
	rm -rf .git
	git init -q -b "$branch" .
	: > .git/paddock-clone-incomplete
	git index-pack --stdin >/dev/null
	git update-ref "refs/heads/$branch" "$base"
	git reset -q --hard
	rm -f .git/paddock-clone-incomplete
	;;
checkout)
	git reset -q --hard
	rm -f .git/paddock-clone-incomplete
	;;
*)
	echo "clonestream.sh: unknown step $step" >&2
	exit 2
	;;
esac
