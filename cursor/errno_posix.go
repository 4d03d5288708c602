//go:build !plan9 && !windows

package cursor

import "syscall"

// platformPermanentCauses are the errno values, beyond permanentCauses,
// that no retry can fix: the file system is mounted read-only (or was
// remounted so after errors), or symbolic links form a loop. Both last
// until an operator acts.
//
// EDQUOT is left out on purpose: like ENOSPC, an exceeded quota clears
// when other files of the same owner are removed, which happens without
// this program (log rotation, clean-up jobs), so waiting and retrying is
// the right response.
var platformPermanentCauses = []error{
	syscall.EROFS,
	syscall.ELOOP,
}
