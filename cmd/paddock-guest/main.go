// Command paddock-guest is what paddock runs inside a box: PID 1 (the
// guest), and its bridge, hook, selftest, put and unpack commands, with
// the same arguments as `paddock guest …`. It links only what the guest
// needs, so each process a box starts for paddock (every Claude Code
// hook, for one) is cheap in time and memory; the Runner binds it, or an
// image carries it, at the path of `paddock` in the box.
package main

import (
	"context"
	"os"

	"github.com/paddockhq/paddock/internal/box/guest"
)

func main() {
	os.Exit(guest.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
