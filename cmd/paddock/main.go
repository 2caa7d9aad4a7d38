// Command paddock runs Claude Code in a sandbox on a machine you control.
// Everything lives in internal/daemon/cli; see README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/paddockhq/paddock/internal/daemon/cli"
	"github.com/paddockhq/paddock/internal/daemon/runtimepolicy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Env: os.Environ(),
		Reexec: runtimepolicy.Reexec})
	stop()
	os.Exit(code)
}
