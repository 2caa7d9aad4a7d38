package sandboxtest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// BareBwrap is the baseline of the local backend's start: bubblewrap with
// the same namespaces and mounts paddock uses, running /bin/true, to exit.
func BareBwrap(tb testing.TB) time.Duration {
	tb.Helper()
	t0 := time.Now()
	cmd := exec.Command("bwrap", "--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000", "--cap-drop", "ALL",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--as-pid-1", "--new-session", "--", "/bin/true")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("bare bwrap: %v %s", err, out)
	}
	return time.Since(t0)
}

// BareDocker is the baseline of the docker backend's start: `docker run`
// of img running /bin/true, without network, to exit. The container is
// removed after the clock stops.
func BareDocker(tb testing.TB, cli *client.Client, img string) time.Duration {
	tb.Helper()
	ctx := context.Background()
	t0 := time.Now()
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: img, Entrypoint: []string{"/bin/true"}, NetworkDisabled: true},
		HostConfig: &container.HostConfig{NetworkMode: "none"}})
	if err != nil {
		tb.Fatal(err)
	}
	defer cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		tb.Fatal(err)
	}
	w := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
	case err := <-w.Error:
		tb.Fatal(err)
	}
	return time.Since(t0)
}
