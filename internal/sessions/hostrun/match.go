package hostrun

import (
	"slices"
	"strings"
)

// rule is one kind of file the host may run or read. A path matches when
// any of the rule's non-empty matchers does. All names in a rule are in
// key form (lower case); TestRuleTable checks that. "base" below is the
// key of the path's last component.
type rule struct {
	why string // what runs or reads the file; shown to the owner

	names []string // base is one of these
	stems []string // base is one of these, or one of these then "." and more
	exts  []string // base ends with one of these (".sh", ".gradle.kts")

	// affixes: base starts with [0] and ends with [1], the two not
	// overlapping, e.g. {"requirements", ".txt"}.
	affixes [][2]string

	// dirs: some component is one of these. The last component counts
	// too: a symbolic link named ".vscode" stands for the directory.
	dirs []string

	// dirSuffixes: some component ends with one of these
	// ("app.xcodeproj").
	dirSuffixes []string

	// seqs: the components include one of these runs, in order and
	// adjacent, anywhere in the path ({".github", "workflows"}). Each run
	// has at least one element.
	seqs [][]string

	// rootDirs: the first component is one of these (generic names that
	// would be noise deeper down, such as "scripts").
	rootDirs []string

	// match is for the few rules the fields above cannot state. It gets
	// the keys of the components, never an empty slice, and must not
	// keep or change it.
	match func(comps []string) bool
}

// scanned reports whether comps (keys, at least one) match one of r's
// matchers that index does not look up: stems, exts, affixes,
// dirSuffixes and match.
func (r *rule) scanned(comps []string) bool {
	base := comps[len(comps)-1]
	for _, s := range r.stems {
		if strings.HasPrefix(base, s) && (len(base) == len(s) || base[len(s)] == '.') {
			return true
		}
	}
	for _, e := range r.exts {
		if strings.HasSuffix(base, e) {
			return true
		}
	}
	for _, a := range r.affixes {
		if len(base) >= len(a[0])+len(a[1]) && strings.HasPrefix(base, a[0]) && strings.HasSuffix(base, a[1]) {
			return true
		}
	}
	if len(r.dirSuffixes) > 0 {
		for _, c := range comps {
			for _, s := range r.dirSuffixes {
				if strings.HasSuffix(c, s) {
					return true
				}
			}
		}
	}
	return r.match != nil && r.match(comps)
}

// index is rules compiled so that a path costs a few map lookups per
// component, not a pass over the table per component: a hostile box can
// hand over megabytes of one path. first gives the same answer as trying
// each rule in order (TestIndexMatchesLinear checks).
type index struct {
	rules  []rule
	byBase map[string]int   // names: base → first rule
	byComp map[string]int   // dirs: any component → first rule
	byRoot map[string]int   // rootDirs: first component → first rule
	bySeq  map[string][]int // seqs: the run's first element → rules, in order
	scan   []int            // rules with scanned matchers, in order
}

// compiled is rules, compiled once; it is never changed.
var compiled = compile(rules)

// compile indexes rs. It keeps the first rule for a name that two rules
// list, as a pass in order would.
func compile(rs []rule) *index {
	ix := &index{
		rules:  rs,
		byBase: map[string]int{},
		byComp: map[string]int{},
		byRoot: map[string]int{},
		bySeq:  map[string][]int{},
	}
	first := func(m map[string]int, k string, i int) {
		if _, ok := m[k]; !ok {
			m[k] = i
		}
	}
	for i, r := range rs {
		for _, n := range r.names {
			first(ix.byBase, n, i)
		}
		for _, d := range r.dirs {
			first(ix.byComp, d, i)
		}
		for _, d := range r.rootDirs {
			first(ix.byRoot, d, i)
		}
		for _, s := range r.seqs {
			if l := ix.bySeq[s[0]]; len(l) == 0 || l[len(l)-1] != i {
				ix.bySeq[s[0]] = append(l, i)
			}
		}
		if len(r.stems)+len(r.exts)+len(r.affixes)+len(r.dirSuffixes) > 0 || r.match != nil {
			ix.scan = append(ix.scan, i)
		}
	}
	return ix
}

// first is the index of the first rule comps (keys, at least one)
// matches, or -1.
func (ix *index) first(comps []string) int {
	best := len(ix.rules) // "none yet"; any match is lower
	try := func(i int, ok bool) {
		if ok && i < best {
			best = i
		}
	}
	try(lookup(ix.byBase, comps[len(comps)-1]))
	try(lookup(ix.byRoot, comps[0]))
	for j, c := range comps {
		try(lookup(ix.byComp, c))
		for _, i := range ix.bySeq[c] {
			if i < best && seqAt(ix.rules[i].seqs, comps, j) {
				best = i
			}
		}
	}
	// Only rules before the best found so far can change the answer.
	for _, i := range ix.scan {
		if i >= best {
			break
		}
		if ix.rules[i].scanned(comps) {
			best = i
			break
		}
	}
	if best == len(ix.rules) {
		return -1
	}
	return best
}

func lookup(m map[string]int, k string) (int, bool) {
	i, ok := m[k]
	return i, ok
}

// seqAt reports whether one of seqs occurs in comps starting at j.
func seqAt(seqs [][]string, comps []string, j int) bool {
	for _, s := range seqs {
		if j+len(s) <= len(comps) && slices.Equal(comps[j:j+len(s)], s) {
			return true
		}
	}
	return false
}
