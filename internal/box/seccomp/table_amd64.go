package seccomp

import "golang.org/x/sys/unix"

// table gives the audit architecture and the mode-taking system calls of
// amd64, with the index of their mode argument.
func table() (uint32, []modeRule, bool) {
	return unix.AUDIT_ARCH_X86_64, []modeRule{
		{unix.SYS_CHMOD, 1},
		{unix.SYS_FCHMOD, 1},
		{unix.SYS_FCHMODAT, 2},
		{unix.SYS_FCHMODAT2, 2},
		{unix.SYS_OPEN, 2},
		{unix.SYS_OPENAT, 3},
		{unix.SYS_CREAT, 1},
		{unix.SYS_MKNOD, 1},
		{unix.SYS_MKNODAT, 2},
	}, true
}
