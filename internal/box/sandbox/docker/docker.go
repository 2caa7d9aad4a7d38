// Package docker is the `docker` backend: Docker Engine through its Go SDK.
//
// Every container is made by one builder, containerSpec, never by hand, and
// is hardened by construction: no network (none), read-only root
// filesystem, non-root user (1000), no-new-privileges, every capability
// dropped, pids/memory/CPU limits, tmpfs /tmp and /run/paddock, a named
// volume for home (never a bind), never the Docker socket, never
// privileged, the runtime the session asks for (runc, runsc). The image's
// entrypoint is `paddock guest`, PID 1.
//
// The channel goes straight to the guest's unix socket inside the
// container's root where the daemon is local and the Runner root; else it
// rides on `docker exec -i <box> paddock guest bridge`, which copies the
// exec stream to that socket (channel.go).
package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	pdkerr "github.com/paddockhq/paddock/internal/base/errdefs"
	"github.com/paddockhq/paddock/internal/box/runtimes"
	"github.com/paddockhq/paddock/internal/box/sandbox"
	"github.com/paddockhq/paddock/internal/box/sandbox/wsmount"
	"golang.org/x/sys/unix"
)

// Name of this backend.
const Name = "docker"

// GuestPath is where images carry the paddock binary.
const GuestPath = "/usr/local/bin/paddock"

// Config configures the backend.
type Config struct {
	// Host is the Docker daemon address; empty uses DOCKER_HOST or the
	// default socket.
	Host string
	// Image is used when CreateOptions.Image is empty.
	Image string
	// TmpSize bounds the /tmp tmpfs (bytes; default 1 GiB).
	TmpSize int64
	// Owner is this Runner's id, put on every object and required by List,
	// Inspect and prune: Runners that share a daemon never touch each
	// other's boxes. Required.
	Owner string
	// Dir holds the backend's files on the host (an empty resolv.conf that
	// replaces the one Docker would copy from the host). Required.
	Dir string
	// ClaudeVersion is the Claude Code version an image must carry when
	// its tag names none (…:claude-V names its own); empty checks only
	// the tag.
	ClaudeVersion string
	// PaddockVersion, when set, is the paddock version an image's guest
	// must be (the Runner sets its own): a box never runs another
	// paddock's guest.
	PaddockVersion string
}

// Backend is the docker backend.
type Backend struct {
	cfg Config
	cli *client.Client
	mu  sync.Mutex

	// direct: channels go straight to the guest's socket (channel.go).
	direct bool
	pmu    sync.Mutex
	procs  map[string]guestProc // by box id: its guest, while it lives
}

var _ sandbox.Backend = (*Backend)(nil)

// New connects to the daemon (API version negotiated, as the client does by
// default unless DOCKER_API_VERSION fixes one) and checks it answers.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	opts := []client.Opt{client.FromEnv}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker backend: the Docker daemon does not answer (is dockerd running? DOCKER_HOST=%q): %v: %w",
			os.Getenv("DOCKER_HOST"), err, pdkerr.ErrUnavailable)
	}
	if cfg.TmpSize == 0 {
		cfg.TmpSize = 1 << 30
	}
	if cfg.Owner == "" {
		cli.Close()
		return nil, fmt.Errorf("docker backend: no owner id: %w", pdkerr.ErrInvalid)
	}
	if cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		cli.Close()
		return nil, fmt.Errorf("docker backend: Dir must be an absolute path: %w", pdkerr.ErrInvalid)
	}
	if err := os.MkdirAll(cfg.Dir, 0o711); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	// Docker copies the host's resolv.conf even into a container without a
	// network; a box has no resolver, so it gets an empty one.
	if err := os.WriteFile(filepath.Join(cfg.Dir, "resolv.conf"), nil, 0o644); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker backend: %w", err)
	}
	return &Backend{cfg: cfg, cli: cli, direct: os.Geteuid() == 0 && isLocalDaemon(cli), procs: map[string]guestProc{}}, nil
}

// Client exposes the SDK client (image builds share it).
func (b *Backend) Client() *client.Client { return b.cli }

// Close releases the client.
func (b *Backend) Close() error { return b.cli.Close() }

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements sandbox.Backend.
func (b *Backend) Capabilities(ctx context.Context) sandbox.Capabilities {
	c := sandbox.Capabilities{Name: Name, NeedsDaemon: true, ReadOnlyRoot: true, SurvivesRunnerRestart: true, SameHost: isLocalDaemon(b.cli)}
	if res, err := b.cli.Info(ctx, client.InfoOptions{}); err == nil {
		info := res.Info
		c.MemoryLimit, c.PidsLimit, c.CPULimit = info.MemoryLimit, info.PidsLimit, info.CPUCfsQuota
		c.Runtime = info.DefaultRuntime
		c.Runtimes = make([]string, 0, len(info.Runtimes))
		for name := range info.Runtimes {
			c.Runtimes = append(c.Runtimes, name)
		}
		slices.Sort(c.Runtimes)
	}
	return c
}

// runtime resolves CreateOptions.Runtime against the daemon's runtimes
// (runtimes.Choose): the name for HostConfig.Runtime, "" for the
// daemon's default. A gVisor runtime for a box that binds a host
// workspace must be registered with runtimes.GVisorArgs.
func (b *Backend) runtime(ctx context.Context, word string, hostWorkspace bool) (string, error) {
	if word == "" {
		return "", nil
	}
	var offered []string
	res, infoErr := b.cli.Info(ctx, client.InfoOptions{})
	if infoErr == nil {
		offered = slices.Sorted(maps.Keys(res.Info.Runtimes))
	}
	name, err := runtimes.Choose(Name, word, offered, isLocalDaemon(b.cli))
	if err != nil || !hostWorkspace || infoErr != nil {
		return name, err
	}
	rt := res.Info.Runtimes[name]
	return name, runtimes.CheckGVisorArgs(name, rt.Path, rt.Args)
}

// labels are sandbox.Labels plus this Runner's owner label.
func (b *Backend) labels(session string, kind sandbox.ObjectKind) map[string]string {
	l := sandbox.Labels(session, kind)
	l[sandbox.LabelOwner] = b.cfg.Owner
	return l
}

func containerName(session string) string { return "paddock-" + session }

func homeVolume(session string) string { return "paddock-" + session + "-home" }

func wsVolume(session string) string { return "paddock-" + session + "-workspace" }

// Spec is everything ContainerCreate gets.
type Spec struct {
	Name   string
	Config *container.Config
	Host   *container.HostConfig
}

// containerSpec is the one builder of a box's container. Its result is
// checked by TestSpecHardened; change both together.
func (b *Backend) containerSpec(o sandbox.CreateOptions, image string) (Spec, error) {
	l := o.Limits.WithDefaults()
	pids := l.Pids
	if runtimes.KindOf(o.Runtime, "") == runtimes.GVisor {
		// The host counts gVisor's own tasks, not the box's: its sentry
		// and gofer (about 33 idle) and, per process in the box, a stub
		// process and its thread. Past the host's limit the sentry cannot
		// make a thread and the whole box ends (runtimes.GVisorPids).
		pids = runtimes.GVisorPids(pids)
	}
	labels := b.labels(o.Session, sandbox.KindBox)
	mounts := []mount.Mount{
		{Type: mount.TypeVolume, Source: homeVolume(o.Session), Target: sandbox.HomeDir},
		{Type: mount.TypeBind, Source: filepath.Join(b.cfg.Dir, "resolv.conf"), Target: "/etc/resolv.conf", ReadOnly: true},
	}
	if o.Clone && o.Workspace == "" {
		return Spec{}, fmt.Errorf("a clone needs the repository it clones (a workspace): %w", pdkerr.ErrInvalid)
	}
	if o.Workspace == "" || o.Clone {
		// The session's own /workspace; a clone box's clone is made there.
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: wsVolume(o.Session), Target: sandbox.WorkspaceDir})
	}
	if o.Workspace != "" {
		real, err := checkWorkspace(o.Workspace)
		if err != nil {
			return Spec{}, err
		}
		if !b.ownMounts() {
			return Spec{}, wsmount.ErrNotRoot
		}
		labels[labelWorkspace] = real
		if o.Clone {
			// Docker binds paddock's read-only view of the repository's
			// git directory, which Start makes from a descriptor
			// (wsmount.MountOrigin: idmapped to the box user); the box
			// writes nothing of the host's.
			labels[labelClone] = "1"
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: b.wsMount(o.Session), Target: sandbox.OriginDir, ReadOnly: true})
		} else {
			if o.UnsafeHostCode {
				labels[labelUnsafeHostCode] = "1"
			}
			// Docker binds paddock's own view of the workspace, which
			// Start makes from a descriptor (wsmount: idmapped to the box
			// user, the host's code read-only on top). Recursive, so that
			// those read-only mounts on top come along.
			mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: b.wsMount(o.Session), Target: sandbox.WorkspaceDir})
		}
	}
	no := false
	return Spec{
		Name: containerName(o.Session),
		Config: &container.Config{
			Image:      image,
			User:       fmt.Sprintf("%d:%d", sandbox.BoxUID, sandbox.BoxUID),
			Hostname:   "paddock",
			WorkingDir: sandbox.WorkspaceDir,
			Entrypoint: []string{GuestPath, "guest", "--setid-guard", "--socket", sandbox.GuestSocket},
			Cmd:        nil,
			Env:        []string{"HOME=" + sandbox.HomeDir, "PATH=/usr/local/bin:/usr/bin:/bin", "DISABLE_AUTOUPDATER=1"},
			Labels:     labels,
			// No network at all; on gVisor, whose netstack takes from the
			// box's namespace what it has, "none" alone: it has a loopback
			// (the guest listens there) and nothing else.
			NetworkDisabled: runtimes.KindOf(o.Runtime, "") != runtimes.GVisor,
			StopSignal:      "SIGTERM",
		},
		Host: &container.HostConfig{
			NetworkMode:    "none",
			ReadonlyRootfs: true,
			Privileged:     false,
			SecurityOpt:    []string{"no-new-privileges:true"},
			CapDrop:        []string{"ALL"},
			IpcMode:        "private",
			Init:           &no, // the guest is PID 1
			Runtime:        o.Runtime,
			Tmpfs: map[string]string{
				// exec: Docker's tmpfs is noexec unless told, and
				// toolchains run what they build there (go test).
				"/tmp":         fmt.Sprintf("rw,nosuid,nodev,exec,size=%d,mode=1777", b.cfg.TmpSize),
				"/run/paddock": fmt.Sprintf("rw,nosuid,nodev,noexec,size=1m,mode=0700,uid=%d,gid=%d", sandbox.BoxUID, sandbox.BoxUID),
			},
			Mounts: mounts,
			Resources: container.Resources{
				Memory:     l.MemoryBytes,
				MemorySwap: l.MemoryBytes, // no swap beyond the limit
				NanoCPUs:   int64(l.CPUs * 1e9),
				PidsLimit:  &pids,
			},
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		},
	}, nil
}

// labelWorkspace is, on a box whose host workspace Docker binds through
// paddock's own mount, the workspace's path as resolved when the box was
// made (for a clone box, labelClone, the repository's).
const labelWorkspace = "paddock.workspace"

// labelWorkspaceUID is the uid the host workspace belonged to when the
// box was made; each start refuses it if it belongs to anyone else by then.
const labelWorkspaceUID = "paddock.workspace-uid"

// labelUnsafeHostCode marks a box whose workspace keeps the host's code
// paths writable (wsmount.HostCode), as its owner asked.
const labelUnsafeHostCode = "paddock.unsafe-host-code"

// labelClone marks a box made with sandbox.CreateOptions.Clone: its bind
// of the session's wsMount is at sandbox.OriginDir, and Start makes there
// the read-only view of labelWorkspace's git directory
// (wsmount.MountOrigin) rather than the workspace's (wsmount.Mount).
const labelClone = "paddock.clone"

func mapErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%s: %v: %w", op, err, pdkerr.ErrNotFound)
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("%s: %v: %w", op, err, pdkerr.ErrConflict)
	case cerrdefs.IsInvalidArgument(err):
		return fmt.Errorf("%s: %v: %w", op, err, pdkerr.ErrInvalid)
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%s: %v: %w", op, err, pdkerr.ErrUnavailable)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Create implements sandbox.Backend.
func (b *Backend) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Box, error) {
	if err := sandbox.ValidSession(o.Session); err != nil {
		return sandbox.Box{}, err
	}
	image := o.Image
	if image == "" {
		image = b.cfg.Image
	}
	if image == "" {
		return sandbox.Box{}, fmt.Errorf("no image for the docker backend; build one with `paddock image build`: %w", pdkerr.ErrInvalid)
	}
	var err error
	if o.Runtime, err = b.runtime(ctx, o.Runtime, o.Workspace != "" && !o.Clone); err != nil {
		return sandbox.Box{}, err
	}
	spec, err := b.containerSpec(o, image)
	if err != nil {
		return sandbox.Box{}, err
	}
	if real := spec.Config.Labels[labelWorkspace]; real != "" {
		// Refused before anything is made: root's, or no idmapped mounts.
		_, own, err := wsmount.Check(real)
		if err != nil {
			return sandbox.Box{}, err
		}
		if err := wsmount.SameOwner(real, own, o.WorkspaceUID); err != nil {
			return sandbox.Box{}, err
		}
		spec.Config.Labels[labelWorkspaceUID] = strconv.Itoa(own.UID)
		if o.Clone {
			if err := wsmount.CheckOrigin(real); err != nil {
				return sandbox.Box{}, err
			}
		}
	}
	// Before anything is made: a missing image is the usual first
	// stumble, an image of an older paddock the next.
	ins, err := b.cli.ImageInspect(ctx, image)
	if cerrdefs.IsNotFound(err) {
		return sandbox.Box{}, fmt.Errorf("the docker backend has no image %s: build it with `%s` (a few minutes the first time), or set docker.image: %w",
			image, b.buildCommand(image), pdkerr.ErrNotFound)
	}
	if err == nil {
		var labels map[string]string
		if ins.Config != nil {
			labels = ins.Config.Labels
		}
		if err := b.checkImage(image, labels); err != nil {
			return sandbox.Box{}, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	vols := []string{homeVolume(o.Session)}
	if o.Workspace == "" || o.Clone {
		vols = append(vols, wsVolume(o.Session))
	}
	// The volumes are made concurrently: each is a daemon round trip.
	errc := make(chan error, len(vols))
	for _, v := range vols {
		go func() {
			_, err := b.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: v, Labels: b.labels(o.Session, sandbox.KindVolume)})
			errc <- mapErr("create volume "+v, err)
		}()
	}
	for range vols {
		if err := <-errc; err != nil {
			return sandbox.Box{}, err
		}
	}
	if real := spec.Config.Labels[labelWorkspace]; real != "" && b.ownMounts() {
		// Docker wants a bind's source to exist when the container is
		// made; Start mounts the workspace's view on it.
		if err := os.MkdirAll(b.wsMount(o.Session), 0o700); err != nil {
			return sandbox.Box{}, fmt.Errorf("workspace mount point: %w", err)
		}
	}
	resp, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: spec.Config, HostConfig: spec.Host,
		NetworkingConfig: &network.NetworkingConfig{}, Name: spec.Name})
	if err != nil && spec.Config.Labels[labelWorkspace] != "" && b.ownMounts() && !cerrdefs.IsConflict(err) {
		b.dropWorkspaceMount(o.Session) // no box holds it (a conflict: the session's box does)
	}
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return sandbox.Box{}, fmt.Errorf("session %s already has a box: %w", o.Session, pdkerr.ErrConflict)
		}
		return sandbox.Box{}, mapErr("create container", err)
	}
	l := o.Limits.WithDefaults()
	return sandbox.Box{ID: resp.ID, Session: o.Session, Backend: Name, State: sandbox.StateCreated, Created: time.Now().UTC(),
		Volume: homeVolume(o.Session), Limits: l, Runtime: o.Runtime}, nil
}

// Start implements sandbox.Backend.
//
// A host workspace comes first. Docker resolves a bind's source again at
// every start, so a symlink that appeared on the workspace's path since the
// box was made (another box may write a parent directory) would bind
// wherever it points. A root Runner rebinds the workspace onto its own
// mount point from a descriptor opened without following any symlink, and
// Docker binds that mount point, which no box can change (ownMounts).
// Otherwise the path must still lead, symlink-free, to a directory; Docker
// resolves it again after that check, which a box swapping a symlink in
// and out can race (SECURITY.md, known limits). Either way a symlink on the
// path refuses the start. A clone box (labelClone) binds the same mount
// point at sandbox.OriginDir, read-only, and gets there only its
// repository's git directory.
func (b *Backend) Start(ctx context.Context, id string) (sandbox.Box, error) {
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return sandbox.Box{}, mapErr("inspect box", err)
	}
	ins := res.Container
	if ins.Config == nil {
		return sandbox.Box{}, fmt.Errorf("container %s has no config: %w", id, pdkerr.ErrNotFound)
	}
	labels := ins.Config.Labels
	session := labels[sandbox.LabelSession]
	clone := labels[labelClone] == "1"
	hostAt := sandbox.WorkspaceDir // where the host's directory is bound
	if clone {
		hostAt = sandbox.OriginDir
	}
	mounted := "" // the session whose workspace this start mounted
	for _, m := range ins.Mounts {
		if m.Destination != hostAt || m.Type != mount.TypeBind {
			continue
		}
		real := labels[labelWorkspace]
		switch {
		case real != "" && sandbox.ValidSession(session) == nil && m.Source == b.wsMount(session):
			if ins.State == nil || !ins.State.Running {
				rt := ""
				if ins.HostConfig != nil {
					rt = ins.HostConfig.Runtime
				}
				if err := b.mountWorkspace(session, labels, rt); err != nil {
					return sandbox.Box{}, err
				}
				mounted = session
			}
		case clone:
			// Only a root Runner makes a clone box, always with its own
			// view: anything else bound there is not paddock's doing.
			return sandbox.Box{}, fmt.Errorf("box %s binds %s at %s, not paddock's view of its repository: remove the session and make it again: %w",
				id, m.Source, m.Destination, pdkerr.ErrConflict)
		case real != "":
			// Made by a Runner that could not mount (not root): Docker
			// binds the resolved path, which must still be symlink-free.
			fd, err := sandbox.OpenWorkspace(m.Source)
			if err != nil {
				return sandbox.Box{}, err
			}
			unix.Close(fd)
		default:
			// Made before paddock resolved workspaces: the path as the
			// owner gave it, symlinks and all; checked as at creation.
			if _, err := checkWorkspace(m.Source); err != nil {
				return sandbox.Box{}, err
			}
		}
	}
	if _, err := b.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		if mounted != "" {
			b.unmountWorkspace(mounted)
		}
		return sandbox.Box{}, mapErr("start box", err)
	}
	return b.Inspect(ctx, id)
}

// Stop implements sandbox.Backend.
func (b *Backend) Stop(ctx context.Context, id string, o sandbox.StopOptions) error {
	b.forget(id)
	secs := 5
	if o.Timeout > 0 {
		secs = int((o.Timeout + time.Second - 1) / time.Second)
	}
	if _, err := b.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs}); err != nil {
		return mapErr("stop box", err)
	}
	// The workspace's view (and its placeholders) goes with the box; the
	// next start makes it again.
	if res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil && res.Container.Config != nil && res.Container.Config.Labels[labelWorkspace] != "" {
		b.unmountWorkspace(res.Container.Config.Labels[sandbox.LabelSession])
	}
	return nil
}

// Remove implements sandbox.Backend.
func (b *Backend) Remove(ctx context.Context, id string, o sandbox.RemoveOptions) error {
	b.forget(id)
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return mapErr("remove box", err)
	}
	ins := res.Container
	session := ins.Config.Labels[sandbox.LabelSession]
	if _, err := b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) &&
		!strings.Contains(err.Error(), "already in progress") {
		return mapErr("remove box", err)
	}
	if ins.Config.Labels[labelWorkspace] != "" {
		b.dropWorkspaceMount(session)
	}
	if o.KeepVolume || session == "" {
		return nil
	}
	var errs []error
	for _, v := range []string{homeVolume(session), wsVolume(session)} {
		if err := b.removeVolume(ctx, v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeVolume retries briefly: a just-removed container may still hold it.
func (b *Backend) removeVolume(ctx context.Context, name string) error {
	var err error
	for i := 0; i < 50; i++ {
		_, err = b.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return mapErr("remove volume "+name, err)
}

// Inspect implements sandbox.Backend.
func (b *Backend) Inspect(ctx context.Context, id string) (sandbox.Box, error) {
	res, err := b.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return sandbox.Box{}, mapErr("inspect box", err)
	}
	ins := res.Container
	if ins.Config == nil || ins.Config.Labels[sandbox.LabelManaged] != "1" || ins.Config.Labels[sandbox.LabelOwner] != b.cfg.Owner {
		return sandbox.Box{}, fmt.Errorf("container %s is not a box of this paddock: %w", id, pdkerr.ErrNotFound)
	}
	st := sandbox.StateStopped
	switch {
	case ins.State != nil && ins.State.Running:
		st = sandbox.StateRunning
	case ins.State != nil && ins.State.Status == "created":
		st = sandbox.StateCreated
	}
	created, _ := time.Parse(time.RFC3339Nano, ins.Created)
	session := ins.Config.Labels[sandbox.LabelSession]
	l := sandbox.Limits{}
	var rt string
	if ins.HostConfig != nil {
		rt = ins.HostConfig.Runtime
		l.MemoryBytes = ins.HostConfig.Memory
		l.CPUs = float64(ins.HostConfig.NanoCPUs) / 1e9
		if ins.HostConfig.PidsLimit != nil {
			l.Pids = *ins.HostConfig.PidsLimit
		}
	}
	if st == sandbox.StateRunning && ins.Config.Labels[labelWorkspace] != "" && sandbox.ValidSession(session) == nil {
		// A box this process did not start (the Runner restarted): its
		// workspace's git files are carried across again.
		wsmount.Resume(b.wsState(session))
	}
	return sandbox.Box{ID: ins.ID, Session: session, Backend: Name, State: st, Created: created, Volume: homeVolume(session), Limits: l, Runtime: rt}, nil
}
