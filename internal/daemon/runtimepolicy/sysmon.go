package runtimepolicy

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// SysmonSetting is the GODEBUG setting the Runner runs with. It keeps the
// runtime's monitor thread (sysmon) out of its deep sleep.
//
// Go's sysmon sleeps on a note whenever every processor is idle, and the
// next system call wakes it and resets its pace to a wake-up every 20 µs.
// A proxy between two requests is idle, so on every request sysmon was
// woken by a futex and then polled at its fastest: measured, a third of
// the Runner's CPU per request at one request at a time and an eighth
// under load, on machines whose two cores the proxy shares with its
// clients (docs/PERFORMANCE.md). With schedtrace set, sysmon never takes
// that sleep (proc.go: "sysmon should not enter deep sleep if schedtrace
// is enabled"), and its pace slows to one wake-up per 10 ms when idle.
//
// The trace itself prints one line to standard error each time its
// period passes, measured from the machine's boot; the period is the
// largest the runtime accepts (about 24.8 days), so a Runner prints at
// most one "SCHED" line when started on a machine up for longer than
// that, and one per 24.8 days after. The runtime reads schedtrace only at
// start, hence Reexec.
const SysmonSetting = "schedtrace=2147483647"

// Env returns environ with SysmonSetting added to GODEBUG, and whether it
// changed anything: not when GODEBUG already sets schedtrace (the owner's
// choice wins). With GODEBUG given twice it edits the first, the one the
// runtime and os.Getenv read.
func Env(environ []string) ([]string, bool) {
	godebug, at := "", -1
	for i, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			godebug, at = v, i
			break
		}
	}
	for _, f := range strings.Split(godebug, ",") {
		if strings.HasPrefix(strings.TrimSpace(f), "schedtrace=") {
			return environ, false
		}
	}
	out := append([]string(nil), environ...)
	if at < 0 {
		return append(out, "GODEBUG="+SysmonSetting), true
	}
	if godebug == "" {
		out[at] = "GODEBUG=" + SysmonSetting
	} else {
		out[at] = "GODEBUG=" + godebug + "," + SysmonSetting
	}
	return out, true
}

// Reexec replaces the process with the same program, arguments and
// descriptors under Env's environment, when that differs from the
// process's: the same pid, now with the setting in force. It returns nil
// without doing anything when nothing needs to change, and an error only
// if the exec failed (the process then goes on as it was). Call it first
// thing, before the process has done anything it would do twice.
func Reexec() error {
	env, changed := Env(os.Environ())
	if !changed {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("runtime policy: %w", err)
	}
	if err := syscall.Exec(exe, os.Args, env); err != nil {
		return fmt.Errorf("runtime policy: re-exec %s: %w", exe, err)
	}
	return nil // not reached
}
