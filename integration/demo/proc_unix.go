//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup makes cmd start in a process group of its own, so that
// Ctrl-C reaches the demo alone, which stops its processes in order.
func ownProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killPID kills the process pid (SIGKILL), ignoring errors: it may be gone.
func killPID(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
