package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/internal/box/cgroup"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox/local"
	"github.com/paddockhq/paddock/internal/credentials/credential"
	"github.com/paddockhq/paddock/internal/daemon/api"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/runner"
	"github.com/paddockhq/paddock/internal/daemon/statedir"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
)

// check is one line of paddock doctor.
type check struct {
	name string
	ok   bool
	what string // what was found
	fix  string // what to do when not ok
}

func doctorCmd(g *globals, o IO) *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this host for paddock: bubblewrap, Docker, cgroups, the pinned CLI, the state dir, the credential",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.resolveStateDir(o)
			if err != nil {
				return err
			}
			cfgPath, mustExist := configPath(dir, cfgPath)
			cfg, cerr := config.Load(cfgPath, mustExist)
			checks := []check{{name: "config", ok: cerr == nil, what: cfgPath, fix: errText(cerr)}}
			if cerr != nil {
				cfg = config.Default()
			}
			checks = append(checks, doctor(cmd.Context(), dir, cfg, o)...)
			failed := 0
			for _, c := range checks {
				mark := "ok  "
				if !c.ok {
					mark, failed = "FAIL", failed+1
				}
				fmt.Fprintf(o.Stdout, "%s %-18s %s\n", mark, c.name, c.what)
				if !c.ok && c.fix != "" {
					fmt.Fprintf(o.Stdout, "     %-18s fix: %s\n", "", c.fix)
				}
			}
			if failed > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "config file (default <state-dir>/paddock.toml)")
	return cmd
}

// runtimeCheck is doctor's line of runtimes: the local backend's, the
// Docker daemon's (nil: not reachable) with the kind of each, and whether
// this host has KVM for a VM runtime. A gVisor runtime the daemon has
// without runtimes.GVisorArgs fails it, with the entry to register.
func runtimeCheck(localRunsc string, docker map[string]system.RuntimeWithStatus, dockerDefault string, kvm bool, kvmWhy string) check {
	c := check{name: "runtimes", ok: true}
	local := "local: " + runtimes.Bwrap + " (shared kernel) default"
	if localRunsc != "" {
		local += ", " + runtimes.Runsc + " (gVisor) " + localRunsc
	} else {
		local += " (no gVisor: `sudo make deps GVISOR=1` builds runsc " + runtimes.GVisorVersion + ")"
	}
	parts := []string{local}
	if docker != nil {
		var names []string
		for _, name := range slices.Sorted(maps.Keys(docker)) {
			rt := docker[name]
			n := name
			switch kind := runtimes.KindOf(name, rt.Path); {
			case kind == runtimes.GVisor:
				n += " (gVisor)"
				if err := runtimes.CheckGVisorArgs(name, rt.Path, rt.Args); err != nil {
					c.ok, c.fix = false, err.Error()
				}
			case kind == runtimes.VM:
				n += " (VM)"
			}
			if name == dockerDefault {
				n += " default"
			}
			names = append(names, n)
		}
		d := "docker: " + strings.Join(names, ", ")
		if !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "(gVisor)") }) {
			d += " (no gVisor: " + runtimes.DockerEntry(runtimes.Runsc) + " in daemon.json adds it)"
		}
		parts = append(parts, d)
	}
	if kvm {
		parts = append(parts, "KVM: yes")
	} else {
		parts = append(parts, "KVM: no, so no VM runtime: "+kvmWhy)
	}
	c.what = strings.Join(parts, "; ")
	return c
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func doctor(ctx context.Context, dir string, cfg config.Config, o IO) []check {
	var out []check
	// bubblewrap: present and able to make the namespaces a box needs.
	if bw, err := exec.LookPath("bwrap"); err != nil {
		out = append(out, check{"bubblewrap", false, "bwrap not found", "apt-get install bubblewrap (the local backend needs it)"})
	} else {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		b, err := exec.CommandContext(cctx, bw, "--unshare-all", "--unshare-user", "--ro-bind", "/usr", "/usr",
			"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--proc", "/proc", "--dev", "/dev", "--", "/bin/true").CombinedOutput()
		cancel()
		out = append(out, check{"bubblewrap", err == nil, bw + " " + strings.TrimSpace(string(b)),
			"bwrap cannot make user namespaces here: check kernel.unprivileged_userns_clone / user.max_user_namespaces"})
	}
	// Docker.
	dc, err := client.New(client.FromEnv)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = dc.Ping(pctx, client.PingOptions{})
		cancel()
		dc.Close()
	}
	out = append(out, check{"docker", err == nil, "daemon " + map[bool]string{true: "reachable", false: "not reachable: " + errText(err)}[err == nil],
		"only for --backend docker: apt-get install docker.io and start dockerd (make deps does both)"})
	// What boxes can run on: each backend's runtimes, and KVM for a VM's.
	var dockerRTs map[string]system.RuntimeWithStatus
	dockerDefault := ""
	if err == nil {
		if dc, err := client.New(client.FromEnv); err == nil {
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if res, err := dc.Info(ictx, client.InfoOptions{}); err == nil {
				dockerRTs, dockerDefault = res.Info.Runtimes, res.Info.DefaultRuntime
			}
			cancel()
			dc.Close()
		}
	}
	kvm, kvmWhy := runtimes.KVM()
	localRunsc := cmp.Or(cfg.Local.Runsc, runtimes.RunscPath())
	if fi, err := os.Stat(localRunsc); err != nil || fi.Mode()&0o111 == 0 {
		localRunsc = ""
	}
	out = append(out, runtimeCheck(localRunsc, dockerRTs, dockerDefault, kvm, kvmWhy))
	// cgroups.
	av := cgroup.Available()
	var missing []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !av[c] {
			missing = append(missing, c)
		}
	}
	out = append(out, check{"cgroup limits", len(missing) == 0, fmt.Sprintf("controllers: memory=%v pids=%v cpu=%v", av["memory"], av["pids"], av["cpu"]),
		"local boxes will run without these limits: " + strings.Join(missing, ", ") + "; enable the controllers (cgroup v1 hierarchies or v2 delegation)"})
	// The pinned Claude Code.
	bin := cfg.Claude.Binary
	if bin == "" {
		bin = claudecode.BinIn(claudecode.Dir(dir, claudecode.PinnedVersion))
	}
	verr := claudecode.Verify(ctx, bin, claudecode.PinnedVersion)
	out = append(out, check{"claude " + claudecode.PinnedVersion, verr == nil, bin, "paddock claude install (or set claude.binary): " + errText(verr)})
	// tmux, which every session runs claude in (local boxes use the host's).
	_, terr := exec.LookPath("tmux")
	out = append(out, check{"tmux", terr == nil, "on PATH: " + fmt.Sprint(terr == nil), "apt-get install tmux"})
	// The state directory.
	if fi, err := os.Stat(dir); err != nil {
		out = append(out, check{"state dir", errors.Is(err, os.ErrNotExist), dir + " does not exist yet (paddock serve makes it)", errText(err)})
	} else {
		st, _ := fi.Sys().(*syscall.Stat_t)
		ok := fi.Mode().Perm()&0o066 == 0 && st != nil && int(st.Uid) == os.Geteuid()
		out = append(out, check{"state dir", ok, fmt.Sprintf("%s mode %v", dir, fi.Mode().Perm()), "chmod 0711 " + dir + " and make it yours; paddock serve does this itself"})
	}
	// What local boxes, running as uids of their own, must reach.
	rerr := local.Reachable([]string{filepath.Join(dir, "local")}, []string{bin})
	out = append(out, check{"boxes reach", rerr == nil, "the state directory and Claude Code, from a box's uid", errText(rerr)})
	// The credential, as the Runner sees it (or would, started from here).
	st, err := api.NewClient(filepath.Join(dir, statedir.APISocket)).CredentialStatus(ctx)
	where := "the Runner"
	if errors.Is(err, api.ErrNoRunner) {
		ch := &credential.Chain{File: credential.File{Path: runner.CredentialFile(dir)}, Env: o.Env}
		var c credential.Credential
		if c, err = ch.Current(); err == nil {
			st = c.Status()
			err = c.Usable(time.Now())
		}
		where = "paddock serve started from this shell"
	}
	what := fmt.Sprintf("%s %s (as %s sees it)", st.Kind, st.Source, where)
	if err != nil {
		what = errText(err)
	}
	out = append(out, check{"credential", err == nil && st.Present, what, "paddock credential login (refreshed by the Runner), paddock credential set (reads stdin), or CLAUDE_CODE_OAUTH_TOKEN / ANTHROPIC_API_KEY for paddock serve"})
	// paddock's own login, where there is one: refreshing must work.
	if ls, lerr := api.NewClient(filepath.Join(dir, statedir.APISocket)).LoginStatus(ctx); lerr == nil && ls.LoggedIn {
		state := "refreshed by the Runner; expires " + ls.Expires.Local().Format(time.RFC3339)
		if ls.Failing || ls.Dead {
			state = "refreshing fails: " + ls.LastError
		}
		out = append(out, check{"login", !ls.Failing && !ls.Dead, state, "paddock credential login (a revoked or rotated-away login cannot be refreshed)"})
	}
	return out
}
