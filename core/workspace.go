package core

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Writing into a workspace (DESIGN.md §9: the shell's sandbox cannot reach the
// host). A thread's workspace is bound
// read-write into the shell's sandbox, so a command may have planted symbolic
// links there (inbox -> /etc, inbox/<message> -> ~/.ssh, inbox/<message>/<name>
// -> ~/.bashrc) to make openbot, which runs unconfined, create or overwrite
// files elsewhere when the next attachment arrives. So openbot opens the
// workspace one directory at a time as an os.Root from its trusted parent,
// refuses any entry that is a link or not a directory, makes the message's
// directory and every file new (O_EXCL: nothing existing is followed or
// truncated), and removes only through the same roots.

// ErrWorkspaceLink is returned (wrapped, with the name) by OpenWorkspace and
// the inbound file download when an entry openbot opens or creates in a
// thread's workspace is a symbolic link or not what it must be, or, for what
// must be new (inbox/<message> and the file), already exists: a sandboxed
// command may have planted it. Nothing was written.
var ErrWorkspaceLink = errors.New("the path in the workspace is a link or already exists")

// dirMode says how subdir treats a missing or existing directory.
type dirMode int

const (
	dirOpen  dirMode = iota // it must exist
	dirMake                 // created when missing
	dirFresh                // created now; an existing entry is refused
)

// OpenWorkspace opens the thread workspace directory dir (FileLimits.Dir) as
// an os.Root, for reading what openbot saved there (a vision bot's images);
// the caller closes it. dir's parent directory comes from the config and is
// trusted; dir itself must be a directory, not a symbolic link
// (ErrWorkspaceLink): in a workspace shared by threads a sandboxed command
// could have planted one. Names opened through the root stay inside dir.
func OpenWorkspace(dir string) (*os.Root, error) { return openWorkspace(dir, dirOpen) }

func openWorkspace(dir string, mode dirMode) (*os.Root, error) {
	dir = filepath.Clean(dir)
	if mode != dirOpen {
		if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
			return nil, fmt.Errorf("create workspace directory: %w", err)
		}
	}
	parent, err := os.OpenRoot(filepath.Dir(dir))
	if err != nil {
		return nil, fmt.Errorf("open workspace directory: %w", err)
	}
	defer parent.Close()
	return subdir(parent, filepath.Base(dir), mode)
}

// subdir opens the directory name (one path element) inside parent as a Root,
// creating it first as mode says. An entry that is a symbolic link or no
// directory, or one that existed for dirFresh, is ErrWorkspaceLink; so is a
// directory swapped for a link between the check and the open (the opened
// root must be the directory checked).
func subdir(parent *os.Root, name string, mode dirMode) (*os.Root, error) {
	refused := fmt.Errorf("%s: %w", name, ErrWorkspaceLink)
	if mode != dirOpen {
		switch err := parent.Mkdir(name, 0o750); {
		case err == nil:
		case !errors.Is(err, fs.ErrExist):
			return nil, fmt.Errorf("create %s: %w", name, err)
		case mode == dirFresh:
			return nil, refused
		}
	}
	st, err := parent.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	if !st.IsDir() {
		return nil, refused
	}
	r, err := parent.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	if got, err := r.Stat("."); err != nil || !os.SameFile(st, got) {
		r.Close()
		return nil, refused
	}
	return r, nil
}

// saveFile creates the new file name in dir and copies at most limit bytes of
// body into it, returning the bytes written. An existing entry of that name
// (a link included) is ErrWorkspaceLink, never followed or truncated; a body
// longer than limit is errTooLarge. On any error the file is removed again.
func saveFile(dir *os.Root, name string, body io.Reader, limit int64) (int64, error) {
	f, err := dir.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if errors.Is(err, fs.ErrExist) {
		return 0, fmt.Errorf("%s: %w", name, ErrWorkspaceLink)
	}
	if err != nil {
		return 0, fmt.Errorf("create file: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(body, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = errTooLarge
	}
	if err != nil {
		dir.Remove(name)
		return 0, err
	}
	return n, nil
}

// OpenSaved opens the file name (slash-separated, relative) inside root for
// reading, as saved by openbot: it must be a regular file, not a symbolic
// link, and the file opened must be the one checked (ErrWorkspaceLink
// otherwise). It never blocks on a FIFO swapped in. The caller closes it.
func OpenSaved(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	name = filepath.FromSlash(name)
	st, err := root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: %w", name, ErrWorkspaceLink)
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	if got, err := f.Stat(); err != nil || !os.SameFile(st, got) {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", name, ErrWorkspaceLink)
	}
	return f, st, nil
}
