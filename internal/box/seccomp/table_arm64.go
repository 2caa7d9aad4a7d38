package seccomp

import "golang.org/x/sys/unix"

// table gives the audit architecture and the mode-taking system calls of
// arm64 (which has only the *at forms), with the index of their mode
// argument.
func table() (uint32, []modeRule, bool) {
	return unix.AUDIT_ARCH_AARCH64, []modeRule{
		{unix.SYS_FCHMOD, 1},
		{unix.SYS_FCHMODAT, 2},
		{unix.SYS_FCHMODAT2, 2},
		{unix.SYS_OPENAT, 3},
		{unix.SYS_MKNODAT, 2},
	}, true
}
