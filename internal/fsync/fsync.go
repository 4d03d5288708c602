// Package fsync makes file-system changes durable.
package fsync

import (
	"os"
	"runtime"
)

// Dir syncs directory dir, which makes the creation or renaming of a file
// in it durable. Windows cannot sync a directory; there it does nothing.
func Dir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
