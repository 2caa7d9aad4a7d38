package api

import "syscall"

func sysSignal(b byte) syscall.Signal { return syscall.Signal(b) }
