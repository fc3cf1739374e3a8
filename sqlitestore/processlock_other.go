//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd || windows)

package sqlitestore

import (
	"fmt"
	"io"
	"runtime"
)

// lockProcess refuses: without a lock that dies with its process, one
// writing process per file cannot be enforced here. Config.ReadOnly still
// opens.
func lockProcess(db, lock string) (io.Closer, error) {
	return nil, fmt.Errorf("sqlitestore: Open: %s: no process lock on %s, so writing is not supported there (Config.ReadOnly is)", db, runtime.GOOS)
}
