package tools

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"openbot/agents"
	"openbot/core"
)

// ErrOutsideWorkspace is returned (wrapped, with the offending path) by the
// workspace tools for a path that is absolute, climbs out with "..", or goes
// through a symbolic link that leads outside the workspace. It matches
// agents.ErrNotRun: the call was refused before it touched anything.
var ErrOutsideWorkspace = agents.NewNotRun("path is outside the workspace")

// ErrHardLink is returned (wrapped, with the path) by the workspace file tools
// for a regular file with more than one hard link: another name of the same
// file may be outside the workspace (a link made from outside), so reading or
// writing it could reach a file the tools must not. It matches agents.ErrNotRun:
// the file is refused before it is read or changed.
var ErrHardLink = agents.NewNotRun("file has other hard links, which may be outside the workspace")

// checkLinks refuses a regular file whose link count is above one (ErrHardLink).
func checkLinks(rel string, st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return nil
	}
	if n := linkCount(st); n > 1 {
		return fmt.Errorf("%q: %w (%d links)", rel, ErrHardLink, n)
	}
	return nil
}

// linkCount is st's number of hard links (1 when the platform does not say).
func linkCount(st fs.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Nlink)
	}
	return 1
}

// workspace resolves the per-bot, per-thread directory the file tools and shell
// work in (DESIGN.md §6 "workspace-jailed file tools").
type workspace struct {
	opts Options
}

// WorkspaceDir returns the absolute, symlink-resolved workspace directory of a
// call under o, the one the file tools and the shell work in, creating it on
// first use (for MCP servers scoped to the thread's workspace). It fails for a
// per-thread directory that is a symbolic link (ErrOutsideWorkspace).
func (o Options) WorkspaceDir(call agents.ToolCall) (string, error) {
	o.WorkspaceRoot = cmp.Or(o.WorkspaceRoot, DefaultWorkspaceRoot)
	return (&workspace{opts: o}).dir(call)
}

// reach describes where the file tools of the bot with this handle read
// (verb "reads") or write, for approval prompts.
func (w *workspace) reach(verb string) func(bot string) string {
	return func(bot string) string {
		if w.opts.SharedWorkspace {
			return verb + " files only inside @" + bot + "'s workspace, which all its threads share; nothing else on the machine"
		}
		return verb + " files only inside this thread's workspace; nothing else on the machine"
	}
}

// dir returns the absolute, symlink-resolved workspace directory of a call,
// creating it on first use. The root comes from the config and is trusted; a
// per-thread directory under it that is a symbolic link is refused
// (ErrOutsideWorkspace): where another sandbox can write the root (a bot's
// workspace inside another's), it could otherwise point this thread's shell
// bind and file tools anywhere.
func (w *workspace) dir(call agents.ToolCall) (string, error) {
	root := w.opts.WorkspaceRoot
	if r, ok := w.opts.BotWorkspaces[call.Bot.Handle]; ok && r != "" {
		root = r
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("workspace directory: %w", err)
	}
	thread := ""
	if !w.opts.SharedWorkspace {
		thread = "thread-" + strconv.FormatUint(uint64(call.Thread), 10)
	}
	if err := os.MkdirAll(filepath.Join(abs, thread), 0o750); err != nil {
		return "", fmt.Errorf("create workspace directory: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("workspace directory: %w", err)
	}
	if thread == "" {
		return real, nil
	}
	real = filepath.Join(real, thread)
	if st, err := os.Lstat(real); err != nil || !st.IsDir() {
		return "", fmt.Errorf("workspace directory %s: %w: it is a symbolic link", real, ErrOutsideWorkspace)
	}
	return real, nil
}

// openRoot opens the call's workspace as an os.Root: every open through it is
// confined to the directory even if a symlink is swapped in after resolve
// checked the path (openat with per-component checks), and the directory
// itself is the one dir checked (core.OpenWorkspace: no link swapped in).
func (w *workspace) openRoot(call agents.ToolCall) (string, *os.Root, error) {
	dir, err := w.dir(call)
	if err != nil {
		return "", nil, err
	}
	r, err := core.OpenWorkspace(dir)
	if errors.Is(err, core.ErrWorkspaceLink) {
		return "", nil, fmt.Errorf("workspace directory %s: %w: it is a symbolic link", dir, ErrOutsideWorkspace)
	}
	if err != nil {
		return "", nil, fmt.Errorf("open workspace: %w", err)
	}
	return dir, r, nil
}

// open opens the call's workspace root and resolves path inside it (resolve), for
// the file tools; it returns the root, the workspace directory and the path
// relative to it. The caller closes the root.
func (w *workspace) open(call agents.ToolCall, path string) (root *os.Root, base, rel string, err error) {
	base, root, err = w.openRoot(call)
	if err != nil {
		return nil, "", "", err
	}
	if rel, err = resolve(base, path); err != nil {
		root.Close()
		return nil, "", "", err
	}
	return root, base, rel, nil
}

// resolve checks that rel names something inside base (an absolute, symlink-free
// directory) and returns it cleaned and relative to base ("." for base itself).
// Absolute paths and ".." that climb out are refused, then the longest existing
// prefix is resolved with filepath.EvalSymlinks and must still be inside base.
// The caller opens the result through an os.Root, which re-checks at open time.
func resolve(base, rel string) (string, error) {
	rel = cmp.Or(rel, ".")
	if filepath.IsAbs(rel) || strings.HasPrefix(rel, "~") {
		return "", fmt.Errorf("%q: %w: use a path relative to the workspace", rel, ErrOutsideWorkspace)
	}
	clean := filepath.Clean(rel)
	if !filepath.IsLocal(clean) && clean != "." {
		return "", fmt.Errorf("%q: %w: \"..\" may not leave the workspace", rel, ErrOutsideWorkspace)
	}
	full := filepath.Join(base, clean)
	// Longest existing prefix, then the part that does not exist yet.
	existing, rest := full, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing || len(parent) < len(base) {
			return "", fmt.Errorf("%q: %w", rel, ErrOutsideWorkspace)
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		// A dangling link: where it points is not known to be inside.
		return "", fmt.Errorf("%q: %w: it goes through a broken symbolic link", rel, ErrOutsideWorkspace)
	}
	if !within(base, real) {
		return "", fmt.Errorf("%q: %w: a symbolic link points outside", rel, ErrOutsideWorkspace)
	}
	out, err := filepath.Rel(base, filepath.Join(real, rest))
	if err != nil || !within(base, filepath.Join(base, out)) {
		return "", fmt.Errorf("%q: %w", rel, ErrOutsideWorkspace)
	}
	return out, nil
}

// within reports whether p is base or below it (both absolute and clean).
func within(base, p string) bool {
	r, err := filepath.Rel(base, p)
	if err != nil {
		return false
	}
	return r == "." || filepath.IsLocal(r)
}

// rootErr turns an os.Root error into a message the model can act on.
func rootErr(rel string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%q does not exist in the workspace", rel)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%q: permission denied", rel)
	case strings.Contains(err.Error(), "escapes"):
		return fmt.Errorf("%q: %w", rel, ErrOutsideWorkspace)
	}
	return fmt.Errorf("%q: %v", rel, err)
}
