package e2e

import (
	"context"
	"io"
	"strings"

	"github.com/paddockhq/paddock/internal/daemon/cli"
)

func mainWithStdin(ctx context.Context, e *env, stdin string, out io.Writer, args ...string) int {
	return cli.Main(ctx, append([]string{"--state-dir", e.dir}, args...), cli.IO{Stdin: strings.NewReader(stdin), Stdout: out, Stderr: out, Env: []string{"PATH=/usr/bin:/bin"}})
}

func mainWithStdin2(ctx context.Context, e *env, stdin io.Reader, out io.Writer, args ...string) int {
	return cli.Main(ctx, append([]string{"--state-dir", e.dir}, args...), cli.IO{Stdin: stdin, Stdout: out, Stderr: out, Env: []string{"PATH=/usr/bin:/bin"}})
}
