// Package sandbox defines the interface every box backend implements, in the
// shape of containerd's sandbox controller: context first, keyed by id,
// options structs that can grow, plain result structs, a Capabilities
// struct, and optional features as small extra interfaces.
//
// A box is where one session's Claude Code runs. Its guest (internal/box/guest)
// is PID 1; Connect returns the raw byte stream to it, over which the Runner
// runs the channel (internal/box/channel). A box needs no network interface for
// that: the stream rides on what the backend already has (a unix socket into
// a bubblewrap namespace, a `docker exec -i` stream).
//
// Every object a backend makes carries the labels LabelManaged=1 and
// LabelSession=<session>, and List finds them all, so that `paddock prune`
// can remove what no session owns. Boxes outlive the Runner: a restarted
// Runner finds them again with Inspect (by the id kept in its store).
package sandbox

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Labels on every object paddock makes.
const (
	LabelManaged = "paddock.managed"
	LabelSession = "paddock.session"
	LabelKind    = "paddock.kind"
	// LabelOwner names the Runner (by the id in its store) that made an
	// object, so Runners sharing a daemon never prune each other's boxes.
	LabelOwner = "paddock.owner"
)

// GuestProtocol numbers what the Runner needs of the guest (the paddock
// binary) in a box image: `guest put` and `unpack`, `guest hook`,
// `--setid-guard`, exec's start codes. A box image carries the number of
// the paddock that built it (LabelGuestProtocol); the docker backend
// refuses an image with a lower one, with the command that rebuilds it.
// Raise it with every change a box image must follow. (The selftest and
// put streams did not raise it: the Runner falls back to `guest selftest`
// and `guest put` with a guest that does not know them.)
const GuestProtocol = 2

// Labels on a box image.
const (
	LabelGuestProtocol = "paddock.guest-protocol"
	LabelClaudeVersion = "paddock.claude-version"
	// LabelPaddockVersion is the version of the paddock binary the image
	// carries as its guest (`paddock version`).
	LabelPaddockVersion = "paddock.version"
	// LabelBase is the digest-pinned base the image was built on.
	LabelBase = "paddock.base"
)

// Paths inside every box.
const (
	HomeDir      = "/home/paddock"
	WorkspaceDir = "/workspace"
	GuestSocket  = "/run/paddock/guest.sock"
	// OriginDir is where a box made with CreateOptions.Clone sees its
	// host repository's git directory, read-only: what its own clone at
	// WorkspaceDir borrows the history from.
	OriginDir = "/run/paddock/origin"
	BoxUser   = "paddock"
	BoxUID    = 1000
)

// State is what a backend observes of a box.
type State string

// States.
const (
	StateCreated State = "created" // exists, never started or stopped
	StateRunning State = "running"
	StateStopped State = "stopped"
)

// Limits are the box's resource limits; zero means the backend's default.
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
}

// DefaultLimits apply where CreateOptions leave a limit at zero.
var DefaultLimits = Limits{MemoryBytes: 4 << 30, Pids: 1024, CPUs: 2}

// WithDefaults fills zero fields from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultLimits.MemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = DefaultLimits.Pids
	}
	if l.CPUs == 0 {
		l.CPUs = DefaultLimits.CPUs
	}
	return l
}

// CreateOptions describe a new box.
type CreateOptions struct {
	// Session owns the box and its home volume (required; see ValidSession).
	Session string
	// Image is the image to run (docker); backends without images ignore it.
	Image string
	// Workspace is a host directory bound at /workspace; empty puts
	// /workspace on the session volume.
	Workspace string
	Limits    Limits
	// ClaudeBinary replaces the backend's Claude Code binary for this box
	// (backends that bind it from the host; image backends use Image).
	ClaudeBinary string
	// UnsafeHostCode leaves writable, in a host workspace, the files the
	// host runs later (wsmount.HostCode): the owner's explicit choice.
	UnsafeHostCode bool
	// WorkspaceUID, when not 0, is the uid Workspace must belong to: its
	// owner's when the session was made. Create refuses a directory of
	// anyone else's, and every later mount of the box checks it again.
	WorkspaceUID int
	// Runtime is what the box runs on, a name Capabilities.Runtimes
	// offers (internal/box/runtimes); "" is the backend's default
	// (Capabilities.Runtime). A name the engine lacks is refused
	// (ErrInvalid) before anything is made.
	Runtime string
	// Clone gives the box, instead of Workspace at WorkspaceDir, only
	// Workspace's git directory, read-only at OriginDir (idmapped to the
	// box's user, as a workspace is), and a WorkspaceDir of its own on the
	// session volume, where the Runner makes the session's clone. Nothing
	// of the host repository is writable from the box. Workspace must be a
	// repository's main worktree (its .git a directory). A backend that
	// cannot bind host directories (Capabilities.StreamedClone) gives the
	// box only its WorkspaceDir, and the Runner streams the history in.
	Clone bool
}

// StopOptions control Stop.
type StopOptions struct {
	// Timeout is how long the guest gets to end its processes before they
	// are killed; zero means 5 seconds.
	Timeout time.Duration
}

// RemoveOptions control Remove.
type RemoveOptions struct {
	// KeepVolume keeps the session volume (home and an internal workspace).
	KeepVolume bool
}

// Box is what a backend reports of one box.
type Box struct {
	ID      string    `json:"id"`
	Session string    `json:"session"`
	Backend string    `json:"backend"`
	State   State     `json:"state"`
	Created time.Time `json:"created"`
	// Volume names the session volume (a directory or a Docker volume).
	Volume string `json:"volume"`
	Limits Limits `json:"limits"`
	// Runtime is what the box runs on (its engine's name for it).
	Runtime string `json:"runtime,omitempty"`
	// Notes say what the backend could not apply, e.g. a limit the host's
	// cgroups do not allow, in words a user can act on.
	Notes []string `json:"notes,omitempty"`
}

// ObjectKind classifies what List reports.
type ObjectKind string

// Object kinds.
const (
	KindBox     ObjectKind = "box"
	KindVolume  ObjectKind = "volume"
	KindProcess ObjectKind = "process"
	KindNetwork ObjectKind = "network"
)

// Object is one labelled thing a backend made.
type Object struct {
	Kind    ObjectKind        `json:"kind"`
	ID      string            `json:"id"`
	Session string            `json:"session"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Capabilities say what a backend can do on this host.
type Capabilities struct {
	Name string
	// NeedsDaemon: the backend talks to a daemon (dockerd) that must run.
	NeedsDaemon bool
	// ReadOnlyRoot: the whole root filesystem is read-only (docker), not
	// only the system directories (local).
	ReadOnlyRoot bool
	// MemoryLimit, PidsLimit, CPULimit: enforced on this host.
	MemoryLimit, PidsLimit, CPULimit bool
	// SurvivesRunnerRestart: boxes keep running when the Runner dies.
	SurvivesRunnerRestart bool
	// Runtime is what a box runs on when CreateOptions.Runtime is empty
	// ("bwrap", the daemon's default "runc"); "" when the engine decides
	// (a cluster's default).
	Runtime string
	// Runtimes are the names CreateOptions.Runtime may take here, or nil
	// when the engine cannot be asked (the engine then refuses a wrong
	// one itself).
	Runtimes []string
	// SameHost: boxes run on this machine (local; a Docker daemon on a
	// unix socket), so a VM runtime needs this machine's KVM.
	SameHost bool
	// ProxyOnly: the backend's boxes must never hold the real credential
	// (kubernetes: nothing in the cluster ever does). The Runner refuses a
	// direct-mode session on such a backend.
	ProxyOnly bool
	// PodNetwork: a box has its cluster's network (a Kubernetes pod's
	// interface and routes) instead of loopback alone; the Runner's
	// self-test then proves that it reaches nothing
	// (`paddock guest selftest --pod-network`).
	PodNetwork bool
	// StreamedClone: a clone box (CreateOptions.Clone) sees no host
	// repository (nothing at OriginDir: a pod may run on any node); the
	// Runner streams the base's history into it at its first start.
	StreamedClone bool
}

// Backend creates, starts, stops and removes boxes of one kind. Methods are
// safe for concurrent use on different ids. Errors wrap errdefs sentinels:
// ErrNotFound for an unknown id, ErrConflict for a wrong state,
// ErrUnavailable when the backend cannot work on this host.
type Backend interface {
	// Name is the backend's name ("local", "docker").
	Name() string
	// Capabilities describe the backend on this host.
	Capabilities(ctx context.Context) Capabilities
	// Create makes the box and, if needed, the session volume. It does not
	// start the box. A session has at most one box (ErrConflict).
	Create(ctx context.Context, o CreateOptions) (Box, error)
	// Start starts the box's guest. Starting a running box is a no-op.
	Start(ctx context.Context, id string) (Box, error)
	// Connect returns a new byte stream to the running box's guest.
	// Closing it ends that channel, not the box.
	Connect(ctx context.Context, id string) (io.ReadWriteCloser, error)
	// Stop ends every process of the box; the volume is kept. Stopping a
	// stopped box is a no-op.
	Stop(ctx context.Context, id string, o StopOptions) error
	// Remove stops and deletes the box and, unless kept, its session
	// volume. Removing a missing box is a no-op.
	Remove(ctx context.Context, id string, o RemoveOptions) error
	// Inspect observes a box now.
	Inspect(ctx context.Context, id string) (Box, error)
	// List returns every object of this backend that carries paddock's
	// labels: boxes, volumes and any other (processes, networks).
	List(ctx context.Context) ([]Object, error)
	// RemoveObject deletes one object List returned (for prune).
	RemoveObject(ctx context.Context, o Object) error
}

// Freezer is a backend that can freeze a running box: its processes stop
// at once and keep their memory (cgroup freezer, docker pause), and thaw
// where they were. A frozen box still reads as running. A backend that is
// not one offers no freeze tier. Freeze of a frozen box and Thaw of a box
// not frozen succeed: someone else (docker pause or unpause by hand) may
// have done it first, and the session must still wake.
type Freezer interface {
	Freeze(ctx context.Context, id string) error
	Thaw(ctx context.Context, id string) error
}

var validSession = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidSession checks a session id: lowercase letters, digits and '-', up
// to 63 characters, so it fits host names, file and volume names.
func ValidSession(s string) error {
	if !validSession.MatchString(s) {
		return fmt.Errorf("session id %q must be lowercase letters, digits and '-', at most 63: %w", s, errdefs.ErrInvalid)
	}
	return nil
}

// Labels returns the labels of an object of session.
func Labels(session string, kind ObjectKind) map[string]string {
	return map[string]string{LabelManaged: "1", LabelSession: session, LabelKind: string(kind)}
}
