// A box's file system as data: what bwrap's arguments (bwrap.go) and
// runsc's OCI bundle (runsc.go) are both made from, so the two runtimes
// can never differ in what a box sees.

package local

import (
	"cmp"
	"os"
	"path/filepath"

	"github.com/paddockhq/paddock/internal/box/sandbox"
)

// mntKind is how one entry of a box's layout is made.
type mntKind int

const (
	mROBind    mntKind = iota // src, read-only, at dst
	mBind                     // src, writable, at dst
	mWorkspace                // the host workspace's view (wsMountPoint), writable, at dst
	mOrigin                   // a clone's view of the repository's git directory, read-only, at dst
	mSymlink                  // a symlink at dst to src
	mProc                     // a proc file system of the box's own
	mDev                      // a minimal /dev (null, zero, random, tty, pts, shm)
	mTmpfs                    // an empty tmpfs
	mDir                      // an empty directory (on the tmpfs above it)
)

// mnt is one entry of a box's layout.
type mnt struct {
	kind     mntKind
	src, dst string
}

// layout is the whole file system of box r, in the order it is built.
// The root is empty and read-only; /usr and the few /etc files a program
// needs are the host's, read-only; only the home directory, /workspace,
// /tmp and /run are writable. Never the host's resolv.conf.
func (b *Backend) layout(r *record) []mnt {
	dir := b.boxDir(r.ID)
	vol := b.volDir(r.Session)
	l := []mnt{
		{mROBind, "/usr", "/usr"},
		{mSymlink, "usr/bin", "/bin"}, {mSymlink, "usr/sbin", "/sbin"},
		{mSymlink, "usr/lib", "/lib"},
	}
	if _, err := os.Stat("/usr/lib64"); err == nil {
		l = append(l, mnt{mSymlink, "usr/lib64", "/lib64"})
	}
	l = append(l,
		mnt{kind: mProc, dst: "/proc"},
		mnt{kind: mDev, dst: "/dev"},
		mnt{kind: mTmpfs, dst: "/tmp"},
		mnt{kind: mTmpfs, dst: "/run"},
		mnt{kind: mDir, dst: "/run/paddock"},
	)
	for _, f := range []string{"passwd", "group", "hosts", "nsswitch.conf"} {
		l = append(l, mnt{mROBind, filepath.Join(dir, "etc", f), "/etc/" + f})
	}
	// What programs need from the host's /etc, read-only.
	for _, p := range []string{"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/localtime", "/etc/terminfo", "/etc/inputrc", "/etc/bash.bashrc", "/etc/profile"} {
		if _, err := os.Stat(p); err == nil {
			l = append(l, mnt{mROBind, p, p})
		}
	}
	if m, ok := b.managedSettings(dir); ok { // paddock's hooks for claude's activity (managed.go)
		l = append(l, m)
	}
	l = append(l, mnt{mROBind, b.cfg.GuestBinary, guestPath})
	if claude := cmp.Or(r.Claude, b.cfg.ClaudeBinary); claude != "" {
		l = append(l, mnt{mROBind, claude, "/opt/claude/bin/claude"})
	}
	l = append(l, mnt{mBind, filepath.Join(vol, "home"), sandbox.HomeDir})
	switch {
	case r.Clone: // the repository's git directory, read-only, for the box's own clone
		l = append(l, mnt{mBind, filepath.Join(vol, "workspace"), sandbox.WorkspaceDir}, mnt{kind: mOrigin, dst: sandbox.OriginDir})
	case r.Workspace != "":
		l = append(l, mnt{kind: mWorkspace, dst: sandbox.WorkspaceDir})
	default:
		l = append(l, mnt{mBind, filepath.Join(vol, "workspace"), sandbox.WorkspaceDir})
	}
	return l
}
