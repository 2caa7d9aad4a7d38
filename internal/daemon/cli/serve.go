package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/paddockhq/paddock/internal/base/logkey"
	"github.com/paddockhq/paddock/internal/box/sandbox/local"
	"github.com/paddockhq/paddock/internal/daemon/config"
	"github.com/paddockhq/paddock/internal/daemon/runner"
	"github.com/paddockhq/paddock/internal/daemon/runtimepolicy"
	"github.com/paddockhq/paddock/internal/daemon/sdnotify"
	"github.com/paddockhq/paddock/internal/daemon/statedir"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/spf13/cobra"
)

// flagOfKey names the flag that overrides a config key, for error messages.
var flagOfKey = map[string]string{
	"log.format":         "log-format",
	"log.level":          "log-level",
	"anthropic.upstream": "upstream",
	"proxy.listen":       "proxy-listen",
	"web.listen":         "web-listen",
}

func serveCmd(g *globals, o IO) *cobra.Command {
	var cfgPath, upstream, proxyListen, webListen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the paddock Runner (the daemon) in the foreground",
		Long: `Run the Runner: it holds your credential, serves the credential proxy and the API
socket under the state directory, and (later) owns the sessions. Stop it with Ctrl-C or SIGTERM.

Configuration: --config (default <state-dir>/paddock.toml, optional); flags override the file.
Credential: "paddock credential set", or CLAUDE_CODE_OAUTH_TOKEN / ANTHROPIC_API_KEY /
ANTHROPIC_AUTH_TOKEN in this command's environment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Reexec != nil {
				// Before anything else: on success this starts over.
				if err := o.Reexec(); err != nil {
					fmt.Fprintf(o.Stderr, "paddock: %v; going on with the runtime's defaults\n", err)
				}
			}
			g.serving = true // its own state directory, never another Runner's
			dir, err := g.resolveStateDir(o)
			if err != nil {
				return err
			}
			cfgPath, mustExist := configPath(dir, cfgPath)
			cfg, err := config.Load(cfgPath, mustExist)
			if err != nil {
				return err
			}
			for _, ov := range []struct {
				flag string
				dst  *string
				v    string
			}{
				{"log-format", &cfg.Log.Format, g.logFormat},
				{"log-level", &cfg.Log.Level, g.logLevel},
				{"upstream", &cfg.Anthropic.Upstream, upstream},
				{"proxy-listen", &cfg.Proxy.Listen, proxyListen},
				{"web-listen", &cfg.Web.Listen, webListen},
			} {
				if flagGiven(cmd, ov.flag) {
					*ov.dst = ov.v
				}
			}
			if err := cfg.Validate(); err != nil {
				var ce *config.Error
				if errors.As(err, &ce) {
					if f, ok := flagOfKey[ce.Key]; ok && flagGiven(cmd, f) {
						return usageError{fmt.Errorf("--%s: %s", f, ce.Msg)}
					}
					ce.File = cfgPath
				}
				return err
			}
			level, _ := config.ParseLevel(cfg.Log.Level)
			log := newLogger(o.Stderr, cfg.Log.Format, level)
			// The process's own environment, which the runtime read.
			runtimepolicy.Apply(os.Getenv)
			// Local boxes run as uids of their own: if they cannot reach the
			// state directory, say so now, not as a box that dies at start.
			if cfg.Sessions.Backend == "" || cfg.Sessions.Backend == "local" {
				claude := cfg.Claude.Binary
				if claude == "" {
					claude = claudecode.BinIn(claudecode.Dir(dir, claudecode.PinnedVersion))
				}
				if err := local.Reachable([]string{filepath.Join(dir, "local")}, []string{claude}); err != nil {
					return err
				}
			}
			r, err := runner.New(runner.Options{StateDir: dir, Config: cfg, Env: o.Env, Log: log})
			if err != nil {
				return err
			}
			if err := r.Listen(); err != nil {
				r.Close()
				return err
			}
			fmt.Fprintf(o.Stderr, "paddock: Runner on %s (state %s); credential proxy on %s\n",
				filepath.Join(dir, statedir.APISocket), dir, orOff(r.ProxyAddr()))
			if u := r.WebAddr(); u != "" {
				// No login in it: `paddock web` asks for a one-time one.
				fmt.Fprintf(o.Stderr, "paddock: web page on %s; log in with the one-time URL that `paddock web` prints\n", u)
				if fp, made := r.WebFingerprint(); fp != "" {
					what := "its certificate"
					if made {
						what = "its certificate, made now,"
					}
					fmt.Fprintf(o.Stderr, "paddock: the page is served over TLS; %s has the SHA-256 fingerprint\n  %s\nCheck that your browser shows the same before you log in on another machine.\n", what, fp)
					if r.Passkeys() {
						fmt.Fprintln(o.Stderr, "paddock: from another machine or a phone, log in with a passkey: `paddock web enroll` prints a link that makes one (docs/REMOTE.md).")
					} else {
						fmt.Fprintln(o.Stderr, "paddock: passkeys, the login from another machine, need the page's name: set web.hosts to the name the browser uses (a passkey cannot be bound to an IP address).")
					}
				}
			}
			// Under systemd (Type=notify): the sockets are bound, so clients
			// that connect from now on are answered once Serve runs.
			if _, err := sdnotify.Notify(o.getenv, sdnotify.Ready, sdnotify.Status("serving "+filepath.Join(dir, statedir.APISocket))); err != nil {
				log.Warn("cannot tell the service manager that the Runner is ready", logkey.Error, err)
			}
			ctx := cmd.Context()
			stopped := make(chan struct{})
			defer close(stopped)
			go func() {
				select {
				case <-ctx.Done():
					_, _ = sdnotify.Notify(o.getenv, sdnotify.Stopping, sdnotify.Status("stopping; boxes keep running"))
				case <-stopped:
				}
			}()
			return r.Serve(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "config file (default <state-dir>/paddock.toml; optional unless given)")
	f.StringVar(&upstream, "upstream", "", "Anthropic API base URL (config anthropic.upstream; https, or http to loopback)")
	f.StringVar(&webListen, "web-listen", "", `web page: loopback host:port or off (config web.listen; default 127.0.0.1:7777)`)
	f.StringVar(&proxyListen, "proxy-listen", "", `credential proxy on the host: unix:/path, 127.0.0.1:PORT or off (config proxy.listen; default unix:<state-dir>/proxy.sock)`)
	return cmd
}

// flagGiven reports whether a flag was set on the command or its parents.
func flagGiven(cmd *cobra.Command, name string) bool {
	if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
		return true
	}
	if f := cmd.InheritedFlags().Lookup(name); f != nil && f.Changed {
		return true
	}
	return false
}

func orOff(s string) string {
	if s == "" {
		return "off (boxes only)"
	}
	return s
}
