//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package sqlitestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockProcess takes an exclusive flock on the lock file at lock, without
// waiting, and writes this process's id into it. The kernel releases the
// lock when the file is closed or the process dies, however it dies, so a
// killed server never blocks its own restart. The descriptor is
// close-on-exec (as every file Go opens), so a child process never inherits
// the lock.
func lockProcess(db, lock string) (io.Closer, error) {
	f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: Open: lock file: %w", err)
	}
	shareOwner(f, db)
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid := holderPID(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, lockedError(db, lock, pid)
		}
		return nil, fmt.Errorf("sqlitestore: Open: lock %s: %w", lock, err)
	}
	// The id is for the error message of a refused opener only; a failure
	// to write it does not weaken the lock.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// shareOwner gives the lock file the database file's owner, group and
// permission bits, as SQLite does for its -wal and -shm files, so that a
// tool run as root beside a service's database (idem sweep) never leaves a
// lock file the service's own user cannot open. Without the rights to do
// so (the usual case: the same user owns both), nothing changes.
func shareOwner(f *os.File, db string) {
	dbInfo, err := os.Stat(db)
	if err != nil {
		return
	}
	st, ok := dbInfo.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	if li, err := f.Stat(); err == nil {
		if lst, ok := li.Sys().(*syscall.Stat_t); ok && lst.Uid == st.Uid && lst.Gid == st.Gid && li.Mode().Perm() == dbInfo.Mode().Perm()&0o666 {
			return
		}
	}
	if os.Geteuid() == 0 {
		_ = f.Chown(int(st.Uid), int(st.Gid))
	}
	_ = f.Chmod(dbInfo.Mode().Perm() & 0o666)
}

func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if ferr = syscall.Flock(int(fd), how); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// holderPID reads the id the lock's holder wrote, or 0.
func holderPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil {
		return 0
	}
	return pid
}
