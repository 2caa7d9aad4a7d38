package guest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/paddockhq/paddock/internal/base/version"
	"github.com/paddockhq/paddock/internal/box/seccomp"
	"github.com/paddockhq/paddock/internal/sessions/boxfiles"
)

// Main is the command line of everything paddock runs inside a box:
// `guest [--socket S] [--setid-guard]` (PID 1), and its subcommands bridge,
// hook, selftest, put and unpack. args start at "guest", as in
// `paddock guest …`, so a box can carry either binary at the same path:
// cmd/paddock-guest, which links this package and little else (a new
// process in a box starts in a few milliseconds and a small share of
// memory), or the full paddock, whose `guest` command calls Main too.
//
// It returns the exit code: 0, 1 on a failure (a self-test that found a
// leak), 2 on a usage error. Errors go to stderr, prefixed "paddock guest".
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "guest" {
		fmt.Fprintln(stderr, "paddock guest: this binary only runs paddock's guest inside a box: guest [bridge|hook|selftest|put|unpack|version]")
		return 2
	}
	err := runMain(ctx, args[1:], stdin, stdout, stderr)
	var ee exitCodeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return int(ee)
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "paddock guest:", err)
		return 2
	}
	fmt.Fprintln(stderr, "paddock guest:", err)
	return 1
}

// exitCodeError is an exit code that speaks for itself (nothing printed).
type exitCodeError int

func (e exitCodeError) Error() string { return fmt.Sprintf("exit %d", int(e)) }

var errUsage = errors.New("usage")

func runMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	// The socket flag belongs to guest and to every subcommand, before or
	// after the subcommand's name, as cobra's persistent flag did.
	socket := DefaultSocket
	top := newFlags("guest")
	top.StringVar(&socket, "socket", DefaultSocket, "the guest's socket inside the box")
	setIDGuard := top.Bool("setid-guard", false, "load the seccomp filter that refuses setuid and setgid files before serving (Docker boxes; bwrap loads it for local ones)")
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	rest := top.Args()
	if len(rest) == 0 {
		// Before anything runs in the box: every process it starts
		// inherits the filter, and none can take it off.
		if *setIDGuard {
			if err := seccomp.Install(); err != nil {
				return err
			}
		}
		return Run(ctx, Options{Socket: socket, Reap: os.Getpid() == 1})
	}
	sub, rest := rest[0], rest[1:]
	fs := newFlags("guest " + sub)
	fs.StringVar(&socket, "socket", socket, "the guest's socket inside the box")
	switch sub {
	case "bridge":
		if err := parseArgs(fs, rest, 0, 0); err != nil {
			return err
		}
		return Bridge(socket, stdin, stdout)
	case "hook":
		if err := parseArgs(fs, rest, 1, 1); err != nil {
			return err
		}
		Hook(socket, fs.Arg(0), stdin) // never fails, prints nothing
		return nil
	case "selftest":
		proxy := fs.String("proxy", "", "the egress proxy address in the box, if the posture has one")
		podNetwork := fs.Bool("pod-network", false, "the box has its cluster's network (a Kubernetes pod): check that it reaches nothing instead of that it has no interface")
		var unreachable multiFlag
		fs.Var(&unreachable, "unreachable", "with --pod-network, an address (host:port) the box must not reach; repeatable")
		if err := parseArgs(fs, rest, 0, 0); err != nil {
			return err
		}
		checks := SelfTest(*proxy)
		if *podNetwork {
			checks = SelfTestPod(*proxy, unreachable)
		}
		return WriteChecks(stdout, checks)
	case "put":
		if err := parseArgs(fs, rest, 1, -1); err != nil {
			return err
		}
		return Put(stdin, fs.Args())
	case "unpack":
		if err := parseArgs(fs, rest, 1, 1); err != nil {
			return err
		}
		return boxfiles.Unpack(stdin, fs.Arg(0))
	case "version":
		if err := parseArgs(fs, rest, 0, 0); err != nil {
			return err
		}
		_, err := fmt.Fprintln(stdout, version.String())
		return err
	}
	return fmt.Errorf("%w: unknown command %q (bridge, hook, selftest, put, unpack, version)", errUsage, sub)
}

// WriteChecks prints checks as JSON lines (ParseChecks reads them) and
// fails with exit code 1 if any failed.
func WriteChecks(w io.Writer, checks []Check) error {
	enc := json.NewEncoder(w)
	for _, c := range checks {
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	for _, c := range checks {
		if !c.OK {
			return exitCodeError(1)
		}
	}
	return nil
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Main says what was wrong, in one line
	return fs
}

// parseArgs parses flags anywhere among args (as cobra does), then checks
// that between min and max positional arguments remain (max < 0: any).
func parseArgs(fs *flag.FlagSet, args []string, min, max int) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		return fmt.Errorf("%w: %s takes %s, got %d", errUsage, fs.Name(), argCount(min, max), len(pos))
	}
	// Leave the positional arguments where fs.Args() finds them.
	return fs.Parse(append([]string{"--"}, pos...))
}

func argCount(min, max int) string {
	switch {
	case min == max:
		return fmt.Sprintf("%d argument(s)", min)
	case max < 0:
		return fmt.Sprintf("at least %d argument(s)", min)
	}
	return fmt.Sprintf("%d to %d arguments", min, max)
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
