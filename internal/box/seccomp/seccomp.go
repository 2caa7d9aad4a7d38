// Package seccomp builds the one seccomp filter paddock puts on every box:
// no file the box creates or changes may carry the setuid or setgid bit.
//
// Why: a box writes a host workspace through an idmapped mount, so what it
// writes lands on the host as the workspace's owner. A setuid or setgid
// file there would run, on the host, with the owner's identity for anyone
// who starts it; `nosuid` on the mount does not stop the bit being written
// (measured: it only stops it taking effect through that mount). So the
// bit must never be set:
//
//   - chmod, fchmod, fchmodat and fchmodat2 fail with EPERM when their mode
//     holds S_ISUID or S_ISGID;
//   - open, openat, creat, mknod and mknodat fail with EPERM when their mode
//     does (a file created with those bits keeps them, less the umask);
//   - openat2, whose mode sits behind a pointer a filter cannot read, fails
//     with ENOSYS, so that libc and Go fall back to openat;
//   - a system call of another ABI (i386 through int 0x80, x32) fails with
//     ENOSYS: its numbers differ and the rules above would not see it.
//
// mkdir and mkdirat need no rule: the kernel drops both bits from their mode
// (a directory inherits S_ISGID from its parent only). Everything else is
// allowed: this filter adds one guard to the box's other walls (namespaces,
// no capabilities, no_new_privs), it does not replace them.
//
// The filter is classic BPF as the kernel takes it (struct sock_filter),
// written out by Program and loaded by bwrap (--seccomp FD) for local boxes
// and by the guest, before it runs anything, in Docker boxes.
package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setIDBits are the mode bits no box may set.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// Return values of the filter.
const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNoSys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// Offsets in struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6].
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// modeRule is one system call whose argument at index arg is a file mode.
type modeRule struct {
	nr  uint32
	arg uint32
}

// x32SyscallBit marks the x32 ABI's system call numbers on amd64.
const x32SyscallBit = 0x40000000

// ErrUnsupported is returned on an architecture the filter has no table for.
var ErrUnsupported = errors.New("seccomp: no setuid guard for this architecture")

// Program returns the filter for this architecture.
func Program() ([]unix.SockFilter, error) {
	arch, rules, ok := table()
	if !ok {
		return nil, fmt.Errorf("%w (%s)", ErrUnsupported, runtime.GOARCH)
	}
	return build(arch, rules), nil
}

// build assembles the program:
//
//	0 ld arch;  jeq native ? 3 : ENOSYS
//	3 ld nr;    jset x32 ? ENOSYS : 6
//	6 jeq openat2 ? ENOSYS : 8
//	8 one jeq per rule, to its check; after the last, ALLOW
//	each check: ld args[arg] (its low 32 bits); jset setIDBits ? EPERM : ALLOW
func build(arch uint32, rules []modeRule) []unix.SockFilter {
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	ret := func(v uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: v} }
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	jset := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	p := []unix.SockFilter{
		ld(offArch),
		jeq(arch, 1, 0),
		ret(retNoSys),
		ld(offNr),
		jset(x32SyscallBit, 0, 1),
		ret(retNoSys),
		jeq(unix.SYS_OPENAT2, 0, 1),
		ret(retNoSys),
	}
	const head = 8
	n := len(rules)
	for i, r := range rules {
		check := head + n + 1 + 4*i // where rule i's check starts
		p = append(p, jeq(r.nr, uint8(check-(head+i)-1), 0))
	}
	p = append(p, ret(retAllow))
	for _, r := range rules {
		// On little-endian machines (the only ones table knows) the
		// low half of the u64 argument comes first.
		p = append(p, ld(offArgs+8*r.arg), jset(setIDBits, 0, 1), ret(retEPERM), ret(retAllow))
	}
	return p
}

// Bytes encodes a program as the kernel's struct sock_filter array, in
// this machine's byte order: what bwrap --seccomp reads from its FD.
func Bytes(p []unix.SockFilter) []byte {
	out := make([]byte, 0, 8*len(p))
	for _, f := range p {
		out = binary.NativeEndian.AppendUint16(out, f.Code)
		out = append(out, f.Jt, f.Jf)
		out = binary.NativeEndian.AppendUint32(out, f.K)
	}
	return out
}

// Install loads the filter on the calling process, for all its threads
// (TSYNC), after setting no_new_privs (which an unprivileged process needs
// to load a filter, and which a box has anyway). Every process started
// afterwards inherits it; nothing can remove it.
func Install() error {
	p, err := Program()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: no_new_privs: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(p)), Filter: &p[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: load the setuid guard: %w", errno)
	}
	return nil
}
