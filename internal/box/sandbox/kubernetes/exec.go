package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// Connect implements sandbox.Backend: `paddock guest bridge` through the
// API server's exec, over WebSocket and, from an API server that does not
// offer it, SPDY (as kubectl does). The stream outlives ctx, which bounds
// only the checks before it; Close ends it.
func (b *Backend) Connect(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	_, session, err := b.box(ctx, id)
	if err != nil {
		return nil, err
	}
	pod, err := b.cs.CoreV1().Pods(b.cfg.Namespace).Get(ctx, boxName(session), metav1.GetOptions{})
	if err != nil || !running(pod) {
		return nil, fmt.Errorf("box %s is not running: %w", id, errdefs.ErrConflict)
	}
	exec, err := b.executor(pod.Name, []string{GuestPath, "guest", "bridge", "--socket", sandbox.GuestSocket}, true)
	if err != nil {
		return nil, fmt.Errorf("exec bridge: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		err := exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: dropAfterClose{outW}, Stderr: io.Discard})
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err)
		inR.CloseWithError(io.ErrClosedPipe)
	}()
	return &execConn{w: inW, r: outR, cancel: cancel}, nil
}

// execConn is one exec stream: writes go to the bridge's stdin, reads come
// from its stdout.
type execConn struct {
	w      *io.PipeWriter
	r      *io.PipeReader
	cancel context.CancelFunc
	once   sync.Once
}

func (c *execConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *execConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close ends the stream: the bridge's stdin closes, then the exec.
func (c *execConn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		c.cancel()
		c.r.Close()
	})
	return nil
}

// executor runs argv in a pod's box container through the API server:
// over WebSocket, or SPDY from an API server that does not offer it.
func (b *Backend) executor(pod string, argv []string, stdin bool) (remotecommand.Executor, error) {
	req := b.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.cfg.Namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: containerName, Command: argv, Stdin: stdin, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.rest, "GET", req.URL().String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.rest, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// run runs argv in a pod and returns its stdout (at most 1 MiB) and exit
// code.
func (b *Backend) run(ctx context.Context, pod string, argv []string) (string, int, error) {
	exec, err := b.executor(pod, argv, false)
	if err != nil {
		return "", 0, err
	}
	var out bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &limitWriter{w: &out, n: 1 << 20}, Stderr: io.Discard})
	var ce utilexec.CodeExitError
	if errors.As(err, &ce) {
		return out.String(), ce.ExitStatus(), nil
	}
	return out.String(), 0, err
}

// limitWriter keeps the first n bytes and drops the rest.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if k := min(len(p), l.n); k > 0 {
		l.n -= k
		_, _ = l.w.Write(p[:k])
	}
	return len(p), nil
}

// dropAfterClose drops what the bridge still sends after the stream's
// reader closed, which client-go would otherwise log as an error.
type dropAfterClose struct{ w *io.PipeWriter }

func (d dropAfterClose) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	if errors.Is(err, io.ErrClosedPipe) {
		return len(p), nil
	}
	return n, err
}
