//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// ownProcessGroup does nothing here: the demo's stand-ins and the Runtime
// Interface Emulator run on Linux and macOS only; this file lets the module
// build everywhere (GOOS=windows go build ./...).
func ownProcessGroup(*exec.Cmd) {}

// killPID kills the process pid, ignoring errors: it may be gone.
func killPID(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
