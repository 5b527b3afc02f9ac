package bench

import "syscall"

// childAttrs makes a soak's processes die with it: a soak killed leaves
// no mount or gc running.
func childAttrs() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
