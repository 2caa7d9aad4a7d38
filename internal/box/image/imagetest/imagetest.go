// Package imagetest gives tests a box image built the way users build
// theirs: `paddock image build` without --base, i.e. on the base paddock
// makes itself (image.DefaultBase, debootstrapped once and kept in the
// local store), with the pinned Claude Code and a freshly built guest.
// Built once per test process; Docker's layer cache makes rebuilds cheap.
// The debootstrapped tree is cached under /var/cache/paddock, keyed by the
// base's recipe, so a machine whose image store is new imports it again
// without debootstrap.
package imagetest

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/paddockhq/paddock/internal/box/image"
	"github.com/paddockhq/paddock/internal/sessions/claudecode"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// cacheDir keeps the debootstrapped tree between runs (as scripts/deps.sh
// keeps its downloads).
const cacheDir = "/var/cache/paddock"

// Tag is the test box image.
const Tag = "paddock-test/box:claude-" + claudecode.PinnedVersion

var (
	once sync.Once
	id   string
	err  error
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
	guest := testenv.GuestBinary(t)
	once.Do(func() {
		ctx := context.Background()
		var progress io.Writer = io.Discard
		if testing.Verbose() {
			progress = os.Stderr
		}
		var base string
		if base, err = Base(ctx, cli, progress); err != nil {
			return
		}
		id, err = image.Build(ctx, cli, image.Spec{Base: base, ClaudeVersion: claudecode.PinnedVersion, Tag: Tag}, claude, guest, progress)
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Base returns the id of the base `paddock image build` uses by default,
// making it if the store lacks it. Test processes run side by side: a
// lock file makes one of them debootstrap while the others wait.
func Base(ctx context.Context, cli *client.Client, progress io.Writer) (string, error) {
	spec := image.DefaultBase()
	if id, err := image.FindBase(ctx, cli, spec); err != nil || id != "" {
		return id, err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cacheDir, "base.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if id, err := image.FindBase(ctx, cli, spec); err != nil || id != "" {
		return id, err // made while this one waited
	}
	return image.MakeBase(ctx, cli, spec, image.MakeBaseOptions{Progress: progress,
		Rootfs: filepath.Join(cacheDir, "rootfs-"+spec.Suite+"-"+spec.Recipe())})
}
