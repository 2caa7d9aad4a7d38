package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/sessions/gitident"
	"github.com/paddockhq/paddock/internal/sessions/hostrun"
)

func diffCmd(g *globals, o IO) *cobra.Command {
	var opt api.DiffOptions
	var color string
	cmd := &cobra.Command{
		Use:   "diff NAME [--stat | --name-only] [--no-untracked]",
		Short: "Show a clone session's change against its base, as git diff does",
		Long: `Show what a session made with paddock run --clone changed since its base: what it committed
on its branch, what it has not committed yet, and the files it made that git does not track,
in one diff, as git diff prints it (--no-untracked leaves out the files git does not track,
whose search is most of the cost in a large tree). Files your machine runs (git hooks, build
files, package manifests, editor and CI config) are named first. Its box must run (paddock wake NAME). Needs the observer
role on the session (or its owner). Nothing is written anywhere; bring the branch into your
repository with paddock fetch NAME.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeSessions(g, o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opt.Stat && opt.NameOnly {
				return usageError{fmt.Errorf("--stat and --name-only each say how to show the change; give one of them")}
			}
			switch color {
			case "always":
				opt.Color = true
			case "never":
			case "auto":
				if f, ok := o.Stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
					opt.Color = true
				}
			default:
				return usageError{fmt.Errorf("--color %q: say auto, always or never", color)}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			return c.DiffSession(cmd.Context(), args[0], opt, o.Stdout)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opt.Stat, "stat", false, "a diffstat: each file and how much of it changed")
	f.BoolVar(&opt.NameOnly, "name-only", false, "the changed files' names only")
	f.StringVar(&color, "color", "auto", "colour: auto (on a terminal), always or never")
	f.BoolVar(&opt.NoUntracked, "no-untracked", false, "leave out the files git does not track (faster in a large tree)")
	return cmd
}

func fetchCmd(g *globals, o IO) *cobra.Command {
	return &cobra.Command{
		Use:   "fetch NAME",
		Short: "Bring a clone session's branch into your repository, as refs/remotes/paddock/NAME/BRANCH",
		Long: `Bring the branch of a session made with paddock run --clone into the repository it was cloned
from, as refs/remotes/paddock/NAME/BRANCH: nothing else of your repository changes (no branch
of yours, no working tree, no index). The branch comes from the box as a git bundle, which is
checked object by object (fsck) and imported as the repository's owner, never as root, with
none of the repository's or the box's hooks, filters or fsmonitor run. Refs that are not plain
branch names are refused. Its box must run (paddock wake NAME). Changes it has not committed
do not come: the session commits them first. Needs the operator role (or its owner).
Then: git log paddock/NAME/BRANCH, git merge paddock/NAME/BRANCH.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeSessions(g, o),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client(o)
			if err != nil {
				return err
			}
			res, err := c.FetchSession(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			for _, r := range res.Refused {
				fmt.Fprintf(o.Stderr, "refused: %s\n", r)
			}
			if res.Ahead == 0 {
				fmt.Fprintf(o.Stdout, "%s has no commit beyond its base yet; nothing fetched\n", args[0])
			} else {
				old := "new"
				switch res.Old {
				case "":
				case res.Commit:
					old = "already there"
				default:
					old = "was " + short(res.Old)
				}
				fmt.Fprintf(o.Stdout, "%s → %s (%d commit(s) ahead of its base; %s)\n", res.Ref, short(res.Commit), res.Ahead, old)
			}
			if res.Uncommitted {
				fmt.Fprintf(o.Stderr, "note: %s has changes it has not committed; they are not fetched (paddock diff %s shows them)\n", args[0], args[0])
			}
			return nil
		},
	}
}

// short is an object id's first 12 digits.
func short(oid string) string { return oid[:min(12, len(oid))] }

func mergeCmd(g *globals, o IO) *cobra.Command {
	var opt api.MergeOptions
	cmd := &cobra.Command{
		Use:   "merge NAME [--squash] [--into BRANCH]",
		Short: "Fetch a clone session's branch and merge it into your branch",
		Long: `Fetch the branch of a session made with paddock run --clone (as paddock fetch does), then merge
it into a branch of the repository it was cloned from: the branch checked out there unless
--into names another. A fast-forward when the branch has not moved since, else a merge
commit (with your git identity); --squash makes one commit of the session's work instead.

The merge runs as the repository's owner with none of the repository's hooks, filters, merge
drivers or fsmonitor, and changes nothing unless it succeeds: a working tree with changes
not committed is refused (commit or stash them first), and so is a conflict, which names
the files and leaves your tree, index and branches exactly as they were; merge those with
git yourself (git merge paddock/NAME/BRANCH). Files the change touches that tools on your
machine run (git hooks, build files, package manifests, editor and CI config) are listed
first. Its box must run (paddock wake NAME). Needs to be the session's owner (or an admin).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeSessions(g, o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if home := envValue(o.Env, "HOME"); home != "" {
				if id, err := gitident.Read(cmd.Context(), home, o.Env); err == nil && !id.IsZero() && id.Check() == nil {
					opt.Identity = &id
				}
			}
			c, err := g.client(o)
			if err != nil {
				return err
			}
			res, err := c.MergeSession(cmd.Context(), args[0], opt)
			for _, r := range res.Fetch.Refused {
				fmt.Fprintf(o.Stderr, "refused: %s\n", r)
			}
			if len(res.HostRun) > 0 {
				fs := make([]hostrun.Finding, len(res.HostRun))
				for i, h := range res.HostRun {
					fs[i] = hostrun.Finding{Path: h.Path, Why: h.Why}
				}
				fmt.Fprintln(o.Stderr, hostrun.Banner(fs))
			}
			if err != nil {
				return err
			}
			switch res.Kind {
			case "up to date":
				fmt.Fprintf(o.Stdout, "%s is already in %s (%s); nothing to merge\n", res.Fetch.Ref, res.Into, short(res.New))
			default:
				where := ""
				if res.WorkTree {
					where = "; your working tree is updated"
				}
				fmt.Fprintf(o.Stdout, "merged session %s into %s: %s, %s → %s, %d file(s) changed%s\n",
					args[0], res.Into, res.Kind, short(res.Old), short(res.New), res.Files, where)
			}
			if res.Fetch.Uncommitted {
				fmt.Fprintf(o.Stderr, "note: %s has changes it has not committed; they are not merged (paddock diff %s shows them)\n", args[0], args[0])
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opt.Squash, "squash", false, "one commit of the session's work on your branch, instead of a merge or a fast-forward")
	f.StringVar(&opt.Into, "into", "", "the branch to merge into (default: the one checked out)")
	return cmd
}

// envValue is key's value in env ("KEY=value" entries), or "".
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
