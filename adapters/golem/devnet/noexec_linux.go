package devnet

import "syscall"

// noexec reports whether dir is on a filesystem mounted noexec (statfs f_flags ST_NOEXEC, 0x8:
// include/linux/statfs.h), where no container could run a binary from it.
func noexec(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return true
	}
	return st.Flags&0x8 != 0
}
