//go:build !linux

package cursor

// pathMax is the longest path a system call takes, in bytes; 0 means no
// limit is checked.
const pathMax = 0

// nameMax returns the longest file name, in bytes, allowed in dir: 255,
// the limit of the common file systems (NTFS, APFS, HFS+, UFS, ZFS count
// in UTF-16 units or characters, so this may refuse a few names they take,
// never one they refuse).
func nameMax(string) int { return defaultNameMax }
