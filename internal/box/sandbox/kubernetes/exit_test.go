package kubernetes

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/channel"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/sandboxtest"
	"github.com/paddockhq/paddock/internal/testkit/testenv"
)

// guestPod is the box's pod with its guest in state cs, in phase phase.
func guestPod(uid types.UID, phase corev1.PodPhase, cs corev1.ContainerState) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "paddock-s1", UID: uid},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, State: cs}}}}
}

var (
	runningState = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waitingState = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
)

func terminated(code int32, reason string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}
}

func deleting(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	return p
}

func TestPodExit(t *testing.T) {
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		done bool
		want sandbox.ExitStatus
	}{
		{"running", guestPod("u", corev1.PodRunning, runningState), false, sandbox.ExitStatus{}},
		{"running, being deleted (grace period)", deleting(guestPod("u", corev1.PodRunning, runningState)), false, sandbox.ExitStatus{}},
		{"exited", guestPod("u", corev1.PodSucceeded, terminated(0, "Completed")), true, sandbox.ExitStatus{Code: 0}},
		{"failed", guestPod("u", corev1.PodFailed, terminated(2, "Error")), true, sandbox.ExitStatus{Code: 2}},
		{"out of memory", guestPod("u", corev1.PodFailed, terminated(137, "OOMKilled")), true, sandbox.ExitStatus{Code: 137, OOMKilled: true}},
		{"terminated, phase not updated yet", guestPod("u", corev1.PodRunning, terminated(143, "Error")), true, sandbox.ExitStatus{Code: 143}},
		{"terminated while being deleted", deleting(guestPod("u", corev1.PodRunning, terminated(0, "Completed"))), true, sandbox.ExitStatus{Code: 0}},
		{"evicted, no container status", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}, true, sandbox.ExitStatus{Code: -1}},
		{"failed, container status stale", guestPod("u", corev1.PodFailed, runningState), true, sandbox.ExitStatus{Code: -1}},
		{"pending: never ran", guestPod("u", corev1.PodPending, waitingState), true, sandbox.ExitStatus{Code: -1}},
		{"pending, no status yet", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, true, sandbox.ExitStatus{Code: -1}},
	} {
		got, done := podExit(c.pod)
		if done != c.done || got != c.want {
			t.Errorf("%s: %+v %v, want %+v %v", c.name, got, done, c.want, c.done)
		}
	}
}

func TestFollowExit(t *testing.T) {
	ev := func(typ watch.EventType, obj apiruntime.Object) watch.Event {
		return watch.Event{Type: typ, Object: obj}
	}
	other := guestPod("u", corev1.PodRunning, runningState)
	other.Name = "paddock-s2"
	for _, c := range []struct {
		name   string
		events []watch.Event
		close  bool
		done   bool
		want   sandbox.ExitStatus
	}{
		{"guest exits", []watch.Event{ev(watch.Modified, guestPod("u", corev1.PodRunning, runningState)),
			ev(watch.Modified, guestPod("u", corev1.PodSucceeded, terminated(0, "Completed")))}, false, true, sandbox.ExitStatus{Code: 0}},
		{"deleted with no grace", []watch.Event{ev(watch.Deleted, guestPod("u", corev1.PodRunning, runningState))}, false, true, sandbox.ExitStatus{Code: -1}},
		{"deleted after its guest ended", []watch.Event{ev(watch.Deleted, guestPod("u", corev1.PodSucceeded, terminated(143, "Error")))}, false, true, sandbox.ExitStatus{Code: 143}},
		{"grace period, then terminated", []watch.Event{ev(watch.Modified, deleting(guestPod("u", corev1.PodRunning, runningState))),
			ev(watch.Modified, deleting(guestPod("u", corev1.PodRunning, terminated(137, "OOMKilled"))))}, false, true, sandbox.ExitStatus{Code: 137, OOMKilled: true}},
		{"a later pod of the name", []watch.Event{ev(watch.Added, guestPod("v", corev1.PodPending, waitingState))}, false, true, sandbox.ExitStatus{Code: -1}},
		{"another pod", []watch.Event{ev(watch.Deleted, other)}, true, false, sandbox.ExitStatus{}},
		{"bookmark", []watch.Event{ev(watch.Bookmark, &corev1.Pod{})}, true, false, sandbox.ExitStatus{}},
		{"too old a version", []watch.Event{ev(watch.Error, &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})}, false, false, sandbox.ExitStatus{}},
		{"watch closed", nil, true, false, sandbox.ExitStatus{}},
	} {
		ch := make(chan watch.Event, len(c.events))
		for _, e := range c.events {
			ch <- e
		}
		if c.close {
			close(ch)
		}
		got, done := followExit(context.Background(), ch, "paddock-s1", "u")
		if done != c.done || got != c.want {
			t.Errorf("%s: %+v %v, want %+v %v", c.name, got, done, c.want, c.done)
		}
	}
}

// TestWaitRewatches: a watch that the API server ends (closed, or with an
// error event such as 410 Gone) is opened again after a fresh read of the
// pod, and Wait returns what a later watch says of the guest's end.
func TestWaitRewatches(t *testing.T) {
	ctx := context.Background()
	b, cs, bx := fakeRunning(t)
	var reads atomic.Int32
	cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, apiruntime.Object, error) {
		reads.Add(1)
		return false, nil, nil
	})
	watchers := make(chan *watch.FakeWatcher, 4)
	cs.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		watchers <- w
		return true, w, nil
	})
	next := func(what string) *watch.FakeWatcher {
		t.Helper()
		select {
		case w := <-watchers:
			return w
		case <-time.After(10 * time.Second):
			t.Fatalf("no watch opened %s", what)
			return nil
		}
	}
	res := sandboxtest.WaitAsync(ctx, b, bx.ID)
	w := next("at first")
	w.Stop() // the API server's timeout
	w = next("after the watch closed")
	w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
	w = next("after an error event")
	sandboxtest.StillWaiting(t, res, "the guest runs")
	if n := reads.Load(); n != 3 {
		t.Errorf("%d reads of the pod for 3 watches, want one before each", n)
	}
	p, err := cs.CoreV1().Pods("ns").Get(ctx, "paddock-s1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: terminated(137, "OOMKilled")}}
	w.Modify(p)
	r := sandboxtest.Within(t, res, 10*time.Second, "the guest ended")
	if r.Err != nil || r.Status.Code != 137 || !r.Status.OOMKilled || r.Status.At.IsZero() {
		t.Fatalf("after an out-of-memory end: %+v %v", r.Status, r.Err)
	}
}

// TestWait runs Wait against the test cluster: on a box whose pod is
// deleted from outside, whose guest exits, that is stopped, that never
// started, that does not exist, and with a ctx cancelled.
func TestWait(t *testing.T) {
	c, ns, rc := cluster(t)
	ctx := context.Background()
	open := func(t *testing.T, owner string) *Backend {
		t.Helper()
		b, err := NewFromREST(ctx, testConfig(c, ns, owner), rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open(t, testenv.UniqueOwner(t))
	admin := c.Clientset()
	start := func(t *testing.T, session string) sandbox.Box {
		t.Helper()
		bx, err := b.Create(ctx, sandbox.CreateOptions{Session: session})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Remove(context.Background(), bx.ID, sandbox.RemoveOptions{}) })
		if bx, err = b.Start(ctx, bx.ID); err != nil {
			t.Fatal(err)
		}
		return bx
	}
	// atOnce: Wait on a box that is not running returns at once, with
	// code (-1 for a box without a pod).
	atOnce := func(t *testing.T, id string, code int, what string) {
		t.Helper()
		t0 := time.Now()
		st, err := b.Wait(ctx, id)
		if err != nil || st.Code != code || st.At.IsZero() {
			t.Fatalf("%s: %+v %v", what, st, err)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("%s: Wait took %v", what, d)
		}
	}

	t.Run("UnknownID", func(t *testing.T) {
		if _, err := b.Wait(ctx, "paddock-no-such-box"); !errdefs.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("an unknown id: %v", err)
		}
	})
	t.Run("NeverStarted", func(t *testing.T) {
		bx, err := b.Create(ctx, sandbox.CreateOptions{Session: "wait-created"})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Remove(ctx, bx.ID, sandbox.RemoveOptions{})
		atOnce(t, bx.ID, -1, "a box never started")
		other := open(t, testenv.UniqueOwner(t)+"-other")
		if _, err := other.Wait(ctx, bx.ID); !errdefs.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("another owner's box: %v", err)
		}
	})
	t.Run("CancelledThenDeletedFromOutside", func(t *testing.T) {
		bx := start(t, "wait-deleted")
		// Cancelled: every Wait returns ctx's error at once, and nothing
		// of them stays behind.
		base := runtime.NumGoroutine()
		cctx, cancel := context.WithCancel(ctx)
		var waits []<-chan sandboxtest.Waited
		for range 10 {
			waits = append(waits, sandboxtest.WaitAsync(cctx, b, bx.ID))
		}
		time.Sleep(2 * time.Second) // all watching
		for _, res := range waits {
			sandboxtest.StillWaiting(t, res, "a running box")
		}
		t.Logf("goroutines: %d before, %d with 10 waits", base, runtime.NumGoroutine())
		cancel()
		t0 := time.Now()
		for _, res := range waits {
			r := sandboxtest.Within(t, res, 2*time.Second, "ctx cancelled")
			if r.Err != context.Canceled { // ctx.Err() itself, not wrapped
				t.Fatalf("after the cancel: %+v %v", r.Status, r.Err)
			}
		}
		t.Logf("10 cancelled waits returned in %v", time.Since(t0))
		var n int
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if n = runtime.NumGoroutine(); n <= base+2 || time.Now().After(deadline) {
				break
			}
		}
		if n > base+2 {
			t.Fatalf("goroutines: %d before the waits, %d after their cancel", base, n)
		}
		t.Logf("goroutines after the cancel: %d", n)
		if _, err := b.Wait(cctx, bx.ID); err != context.Canceled {
			t.Fatalf("a ctx done before the call: %v", err)
		}

		// Deleted as `kubectl delete pod --force --grace-period=0` does.
		res := sandboxtest.WaitAsync(ctx, b, bx.ID)
		time.Sleep(time.Second)
		sandboxtest.StillWaiting(t, res, "a running box")
		grace := int64(0)
		if err := admin.CoreV1().Pods(ns).Delete(ctx, boxName("wait-deleted"), metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			t.Fatal(err)
		}
		t0 = time.Now()
		r := sandboxtest.Within(t, res, 30*time.Second, "the pod deleted")
		if r.Err != nil || r.Status.At.IsZero() || r.Status.Code != -1 && r.Status.Code != 0 && r.Status.Code != 137 && r.Status.Code != 143 {
			t.Fatalf("after the pod's deletion: %+v %v", r.Status, r.Err)
		}
		t.Logf("the pod deleted: Wait returned %+v in %v", r.Status, time.Since(t0))
		atOnce(t, bx.ID, -1, "a box whose pod was deleted")
	})
	t.Run("GuestExits", func(t *testing.T) {
		bx := start(t, "wait-exits")
		res := sandboxtest.WaitAsync(ctx, b, bx.ID)
		cl := sandboxtest.Connect(t, b, bx.ID)
		defer cl.Close()
		// SIGTERM to the guest (pid 1 of the box): it shuts the box down
		// and exits 0. The exec itself dies in that shutdown.
		// The exec's own reply may be lost in that shutdown ("read reply:
		// EOF"): the guest's exit, below, is what counts.
		if p, err := cl.Exec(channel.ExecOptions{Argv: []string{"/bin/sh", "-c", "kill -TERM 1; sleep 60"}, Env: sandboxtest.Env}); err != nil {
			t.Logf("the exec that ends the guest: %v", err)
		} else {
			go p.Wait()
		}
		r := sandboxtest.Within(t, res, 60*time.Second, "the guest exits")
		if r.Err != nil || r.Status.Code != 0 || r.Status.OOMKilled {
			t.Fatalf("after the guest's exit: %+v %v", r.Status, r.Err)
		}
		if got, err := b.Inspect(ctx, bx.ID); err != nil || got.State != sandbox.StateStopped {
			t.Fatalf("after the guest's exit: %+v %v", got, err)
		}
		// Its pod stays, ended, and says how.
		atOnce(t, bx.ID, 0, "a box whose guest exited")
	})
	t.Run("Stopped", func(t *testing.T) {
		bx := start(t, "wait-stopped")
		res := sandboxtest.WaitAsync(ctx, b, bx.ID)
		time.Sleep(time.Second)
		sandboxtest.StillWaiting(t, res, "a running box")
		// Stop deletes the pod with a grace period: Wait sees it being
		// deleted, then its guest end or the pod gone.
		if err := b.Stop(ctx, bx.ID, sandbox.StopOptions{Timeout: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
		r := sandboxtest.Within(t, res, 10*time.Second, "the box stopped")
		if r.Err != nil || r.Status.Code != 0 && r.Status.Code != -1 {
			t.Fatalf("after the stop: %+v %v", r.Status, r.Err)
		}
		t.Logf("the box stopped: Wait returned %+v", r.Status)
		atOnce(t, bx.ID, -1, "a stopped box")
	})
}
