package cursor

import "syscall"

// pathMax is the longest path a system call takes, in bytes: PATH_MAX
// less the final NUL.
const pathMax = syscall.PathMax - 1

// nameMax returns the longest file name, in bytes, that the file system
// holding dir allows, as statfs reports it, or 255 when it does not say.
func nameMax(dir string) int {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Namelen <= 0 {
		return defaultNameMax
	}
	return int(st.Namelen)
}
