package k8stest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/box/image/imagetest"
)

// pauseSource is the pods' sandbox ("pause") program: it holds the pod's
// namespaces, reaps what is reparented to it, and exits on SIGTERM or
// SIGINT. There is no registry to pull registry.k8s.io/pause from.
const pauseSource = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range c {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
	}
}
`

// buildPause builds pauseSource (static) in dir and writes it there as a
// one-layer image archive, image.tar, named pauseImage.
func buildPause(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(pauseSource), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module pause\n\ngo 1.24\n"), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", "pause", ".")
	cmd.Dir = dir
	cmd.Env = mergeEnv(os.Environ(), []string{"CGO_ENABLED=0", "GOOS=linux", "GOFLAGS="})
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the pause program: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "pause"))
	if err != nil {
		return err
	}
	return writeImage(filepath.Join(dir, "image.tar"), pauseImage, "pause", bin)
}

// writeImage writes an image archive in `docker save`'s format (which
// `ctr images import` reads) holding one layer with one executable file,
// the image's entrypoint.
func writeImage(file, name, exe string, content []byte) error {
	// The layer: one regular file at the root, owned by root.
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: exe, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := lw.Write(content); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}
	// Uncompressed, so the layer's digest is also its diff id.
	layerSum := sha256.Sum256(layer.Bytes())
	layerHex := hex.EncodeToString(layerSum[:])
	config, err := json.Marshal(map[string]any{
		"architecture": goruntime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{"/" + exe}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerHex}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{name}, "Layers": []string{layerHex + "/layer.tar"},
	}})
	if err != nil {
		return err
	}
	// The archive: the layer, the config named by its digest, and the
	// manifest that ties them to the name.
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	w := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{layerHex + "/layer.tar", layer.Bytes()}, {configName, config}, {"manifest.json", manifest}} {
		if err := w.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := w.Write(e.data); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// importTar imports an image archive into containerd's k8s.io namespace,
// the one its CRI plugin (so the kubelet) sees.
func importTar(ctx context.Context, sock, file string) error {
	out, err := exec.CommandContext(ctx, "ctr", "-a", sock, "-n", "k8s.io", "images", "import", file).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", file, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// imported remembers the image ids ImportImage has put in the cluster.
var imported sync.Map // run id, image id and reference → true

// ImportImage makes a local Docker image available to the cluster's pods
// (`docker save` into `ctr images import`; there is no registry): pods name
// it by the reference given, normalised as Kubernetes does (name:tag is
// docker.io/name:tag), with imagePullPolicy Never. ref must carry a name,
// not only an image id. Importing an image id already imported is free.
func (c *Cluster) ImportImage(t testing.TB, ref string) {
	t.Helper()
	cli := imagetest.Docker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// By id: a tag moved to a new build is imported again.
	insp, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatalf("k8stest: ImportImage %s: %v", ref, err)
	}
	key := c.in.id + "\x00" + insp.ID + "\x00" + ref
	if _, done := imported.Load(key); done {
		return
	}
	t0 := time.Now()
	rd, err := cli.ImageSave(ctx, []string{ref})
	if err != nil {
		t.Fatalf("k8stest: docker save %s: %v", ref, err)
	}
	defer rd.Close()
	// Streamed: the archive (hundreds of MB for the box image) is never
	// written to disk; ctr unpacks it for the overlayfs snapshotter.
	cmd := exec.CommandContext(ctx, "ctr", "-a", c.in.containerdSock(), "-n", "k8s.io", "images", "import", "-")
	cmd.Stdin = rd
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("k8stest: docker save %s | ctr images import: %v: %s", ref, err, out)
	}
	imported.Store(key, true)
	t.Logf("k8stest: imported %s (%s) in %v", ref, insp.ID, time.Since(t0).Round(time.Millisecond))
}
