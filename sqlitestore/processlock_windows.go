//go:build windows

package sqlitestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// errorSharingViolation is Windows' ERROR_SHARING_VIOLATION.
const errorSharingViolation = syscall.Errno(32)

// lockProcess opens the lock file at lock with no sharing allowed, which
// keeps every other process from opening it until this one closes it or
// dies. (No other process can read the file, so a refused opener cannot
// name the holder.)
func lockProcess(db, lock string) (io.Closer, error) {
	name, err := syscall.UTF16PtrFromString(lock)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: Open: lock file: %w", err)
	}
	h, err := syscall.CreateFile(name, syscall.GENERIC_READ|syscall.GENERIC_WRITE, 0, nil,
		syscall.OPEN_ALWAYS, syscall.FILE_ATTRIBUTE_NORMAL, 0)
	if errors.Is(err, errorSharingViolation) {
		return nil, lockedError(db, lock, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: Open: lock %s: %w", lock, err)
	}
	return os.NewFile(uintptr(h), lock), nil
}
