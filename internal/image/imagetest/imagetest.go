// Package imagetest gives tests a box image built the way users build
// theirs: `paddock image build` logic on a digest-pinned local base (the
// Debian rootfs that `make deps` imports as paddock-test/base:bookworm),
// with the pinned Claude Code and a freshly built guest. Built once per
// test process; Docker's layer cache makes rebuilds cheap.
package imagetest

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/claudecode"
	"github.com/paddockhq/paddock/internal/image"
	"github.com/paddockhq/paddock/internal/testenv"
)

// BaseTag is the test base `make deps` imports.
const BaseTag = "paddock-test/base:bookworm-3"

// Tag is the test box image.
const Tag = "paddock-test/box:claude-" + claudecode.PinnedVersion

var (
	once sync.Once
	id   string
	err  error
	skip string
)

// Docker returns a client for the local daemon, or skips/fails.
func Docker(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		testenv.Missing(t, "docker client: "+err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		testenv.Missing(t, "no Docker daemon (run `make deps`, which starts dockerd): "+err.Error())
	}
	return cli
}

// BoxImage returns the id of the test box image, building it if needed.
func BoxImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	claude := testenv.Claude(t)
	guest := testenv.PaddockBinary(t)
	once.Do(func() {
		ctx := context.Background()
		base, e := cli.ImageInspect(ctx, BaseTag)
		if e != nil {
			skip = "no test base image " + BaseTag + " (run `make deps`): " + e.Error()
			return
		}
		var progress io.Writer = io.Discard
		if testing.Verbose() {
			progress = os.Stderr
		}
		id, err = image.Build(ctx, cli, image.Spec{Base: base.ID, ClaudeVersion: claudecode.PinnedVersion, Tag: Tag}, claude, guest, progress)
	})
	if skip != "" {
		testenv.Missing(t, skip)
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}
