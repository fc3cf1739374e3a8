package natstest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill the server if the test process dies
// first, so that a killed test leaves no broker behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
