# objdir.sh: the quarantine of an import (objdir.go), run as the
# repository's owner so that the Runner (root) makes, moves and removes
# nothing in a directory another user controls.
#
# Arguments: $1 make, keep or drop; $2 the quarantine, a directory of the
#   repository's objects directory; $3 that objects directory.
#   make: create the quarantine (git index-pack writes its pack there).
#   keep: move its loose objects (a merge writes them) into $3/xx/, and
#     its packs into $3/pack as git's own quarantine does (tmp-objdir.c):
#     each .pack before its .rev before its .idx, since git finds a pack by
#     its .idx; an object or pack already there (same name, same content)
#     is not moved again. Then remove the quarantine.
#   drop: remove the quarantine and whatever is in it.
# Stdin: none.
# Exit status: 0 when done; non-zero, with a message, when a step fails.
set -eu
q=$2
case $1 in
make)
	mkdir -m 0700 -- "$q"
	;;
keep)
	for d in "$q"/[0-9a-f][0-9a-f]; do
		[ -d "$d" ] || continue
		mkdir -p -- "$3/${d##*/}"
		for f in "$d"/*; do
			[ -f "$f" ] || continue
			dst=$3/${d##*/}/${f##*/}
			[ -e "$dst" ] || mv -- "$f" "$dst"
		done
	done
	mkdir -p -- "$3/pack"
	for ext in pack rev idx; do
		for f in "$q"/pack/pack-*."$ext"; do
			[ -f "$f" ] || continue
			dst=$3/pack/${f##*/}
			if [ -e "$dst" ]; then
				rm -f -- "$f"
			else
				mv -- "$f" "$dst"
			fi
		done
	done
	rm -rf -- "$q"
	;;
drop)
	rm -rf -- "$q"
	;;
*)
	echo "objdir.sh: unknown verb $1" >&2
	exit 2
	;;
esac
