// Package people is who calls the Runner: host users, learnt from the
// kernel (SO_PEERCRED on the API socket), never from anything a client
// says. A Person travels in a request's context from the transport that
// identified it (the API socket, a web login) to the access checks.
//
// Membership of the Runner's group (api.group) is read from the host's
// user database on every check, never cached across calls: removing a
// user from the group takes effect at their next request.
package people

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/user"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/internal/base/errdefs"
)

// Person is a host user calling the Runner.
type Person struct {
	UID  uint32 `json:"uid"`
	Name string `json:"name"`
	// Admin: root or the Runner's own user; sees and may do everything.
	Admin bool `json:"admin,omitempty"`
	// Via is how they reach the Runner when it is not its socket or the
	// web page's login: "token ID" for an API token (audit.Entry.Via).
	Via string `json:"via,omitempty"`
}

func (p Person) String() string {
	if p.Name != "" {
		return p.Name
	}
	return "uid " + strconv.FormatUint(uint64(p.UID), 10)
}

type ctxKey struct{}

// With returns ctx carrying p.
func With(ctx context.Context, p Person) context.Context { return context.WithValue(ctx, ctxKey{}, p) }

// From returns the person ctx carries; ok is false when none does (a call
// from inside the Runner, never from a client).
func From(ctx context.Context) (Person, bool) {
	p, ok := ctx.Value(ctxKey{}).(Person)
	return p, ok
}

// PeerUID returns the uid of the process at the other end of a unix
// socket connection, as the kernel recorded it at connect(2).
func PeerUID(c net.Conn) (uint32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("peer credentials: %T is not a unix socket", c)
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, fmt.Errorf("peer credentials: %w", serr)
	}
	return cred.Uid, nil
}

// Directory answers who a uid or a name is and who is in the group.
type Directory struct {
	// Group, if set, is api.group: only its members (and admins) may call.
	Group string
	// AdminUID is the Runner's own user; root is always an admin too.
	AdminUID uint32
}

// ErrNotMember is wrapped when a user is not in the Runner's group.
var ErrNotMember = errors.New("not a member of the Runner's group")

// notMember is a refusal for want of membership: it is ErrNotMember and
// wraps errdefs.ErrForbidden, and says so once.
type notMember struct{ error }

func (notMember) Is(target error) bool { return target == ErrNotMember }

func (e notMember) Unwrap() error { return e.error }

// Person returns the current record of uid: its name and whether it is an
// admin. It fails, wrapping errdefs.ErrForbidden and ErrNotMember, when a
// group is set and uid is neither an admin nor in it now.
func (d Directory) Person(uid uint32) (Person, error) {
	p := Person{UID: uid, Admin: uid == 0 || uid == d.AdminUID}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err == nil {
		p.Name = u.Username
	}
	if p.Admin {
		return p, nil
	}
	if err != nil {
		return Person{}, fmt.Errorf("uid %d has no entry in the host's user database: %w", uid, errdefs.ErrForbidden)
	}
	if d.Group == "" {
		// No group: the socket is the Runner's user's alone (0600).
		return Person{}, fmt.Errorf("%s may not use this Runner: it serves its own user only (set api.group to share it): %w", p, errdefs.ErrForbidden)
	}
	in, err := d.InGroup(u)
	if err != nil {
		return Person{}, err
	}
	if !in {
		return Person{}, notMember{fmt.Errorf("%s is not in group %q, which this Runner serves (api.group); an admin adds them with: sudo usermod -aG %s %s: %w",
			p, d.Group, d.Group, p.Name, errdefs.ErrForbidden)}
	}
	return p, nil
}

// InGroup reports whether u is in d.Group now: as its primary group or as
// a listed member.
func (d Directory) InGroup(u *user.User) (bool, error) {
	g, err := user.LookupGroup(d.Group)
	if err != nil {
		return false, fmt.Errorf("api.group %q: %w", d.Group, err)
	}
	if u.Gid == g.Gid {
		return true, nil
	}
	ids, err := u.GroupIds()
	if err != nil {
		return false, fmt.Errorf("groups of %s: %w", u.Username, err)
	}
	return slices.Contains(ids, g.Gid), nil
}

// Lookup finds a user by name, for sharing: an unknown name, or one outside
// the group, is an error that says so.
func (d Directory) Lookup(name string) (Person, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return Person{}, fmt.Errorf("no user %q on this host; give the login name of a person of this host (as getent passwd lists them): %w", name, errdefs.ErrNotFound)
	}
	id, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return Person{}, fmt.Errorf("user %q has uid %q: %w", name, u.Uid, errdefs.ErrInvalid)
	}
	return d.Person(uint32(id))
}
