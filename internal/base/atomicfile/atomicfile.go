// Package atomicfile writes files so that a reader sees the old contents or
// the new, never a mix, and a crash never leaves a half-written file.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data: a temporary file in the same directory,
// created with perm, written, fsynced, renamed over path, then the directory
// fsynced so the rename itself is durable.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	return write(path, data, perm, true)
}

// WriteNoSync is Write without the fsyncs: still never half-written, but
// not durable across a power loss. For records that a machine crash makes
// moot anyway (a running box's pid).
func WriteNoSync(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, false)
}

func write(path string, data []byte, perm os.FileMode, durable bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if durable {
		if err = f.Sync(); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !durable {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil // the rename happened; durability of the dir entry is best effort
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}
