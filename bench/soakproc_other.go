//go:build !linux

package bench

import "syscall"

// childAttrs: elsewhere than on Linux a soak's processes outlive it if
// it is killed.
func childAttrs() *syscall.SysProcAttr { return nil }
