package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"openbot/agents"
	"openbot/core"
)

// DefaultSendFileMax is the largest file send_file posts (Telegram's upload
// limit for bots is 50 MB; Feishu's is 30 MB and the adapter says so).
const DefaultSendFileMax = 50 << 20

// sendFileTool posts a workspace file into the thread (DESIGN.md §6 tools,
// files in both directions). The file is copied at call time into the
// outbound staging directory (Options.OutboxDir), outside every workspace, so
// what is delivered later through the durable outbox is what the bot chose,
// whatever happens in the workspace meanwhile (a swapped-in symbolic link
// cannot point the delivery elsewhere).
func sendFileTool(ws *workspace) agents.Tool {
	return &tool{
		name: "send_file",
		reach: func(bot string) string {
			return "posts one file from @" + bot + "'s workspace into this thread, where its people can read it"
		},
		desc: "Post a file from your workspace into this conversation (a report, a patch, an image), with an optional caption. " +
			"The path is relative to the workspace. Files people send you are saved under inbox/<message>/.",
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"File path relative to the workspace"},` +
			`"caption":{"type":"string","description":"Optional text shown with the file"}},` +
			`"required":["path"],"additionalProperties":false}`),
		fn: func(ctx context.Context, call agents.ToolCall) (string, error) {
			var a struct {
				Path    string `json:"path"`
				Caption string `json:"caption"`
			}
			if err := decodeArgs(call.Args, &a); err != nil {
				return "", err
			}
			if a.Path == "" {
				return "", agents.NotRun(errors.New("path is required"))
			}
			fp, ok := call.Env.(core.FilePoster)
			if call.Env == nil || !ok {
				return "", agents.NotRun(errors.New("send_file is not available outside a run"))
			}
			staged, err := ws.stage(call, a.Path)
			if err != nil {
				return "", err
			}
			id, err := fp.PostFile(ctx, staged, strings.TrimSpace(a.Caption))
			if err != nil {
				os.RemoveAll(filepath.Dir(staged))
				return "", fmt.Errorf("post file: %v", err)
			}
			return fmt.Sprintf("file %s queued for posting as message %d", filepath.Base(staged), id), nil
		},
	}
}

// stage copies workspace file p into a fresh directory under the staging
// directory and returns the copy's absolute path. It refuses paths outside the
// workspace, non-regular files, files with other hard links and files larger
// than DefaultSendFileMax.
func (w *workspace) stage(call agents.ToolCall, p string) (string, error) {
	root, _, rel, err := w.open(call, p)
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a FIFO cannot hang it
	if err != nil {
		return "", rootErr(p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", rootErr(p, err)
	}
	if !st.Mode().IsRegular() {
		return "", agents.NotRun(fmt.Errorf("%q is not a regular file", p))
	}
	if err := checkLinks(p, st); err != nil {
		return "", err
	}
	if st.Size() == 0 || st.Size() > DefaultSendFileMax {
		return "", agents.NotRun(fmt.Errorf("%q is %d bytes; send_file posts 1 byte to %d MB", p, st.Size(), DefaultSendFileMax>>20))
	}
	w.pruneStaged(time.Now())
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	dir := filepath.Join(w.outboxDir(), fmt.Sprintf("run-%d-%s", call.Run, hex.EncodeToString(rnd[:])))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("staging directory: %w", err)
	}
	dst := filepath.Join(dir, core.SafeFileName(filepath.Base(rel), "file"))
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return "", fmt.Errorf("staging file: %w", err)
	}
	_, err = io.Copy(out, io.LimitReader(f, DefaultSendFileMax+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("staging file: %w", err)
	}
	return dst, nil
}

// stagedKeep is how long staged copies are kept: far longer than the outbox
// retries a delivery (minutes), so a copy is gone only once its entry settled,
// unless openbot was stopped for that long with the entry pending.
const stagedKeep = 7 * 24 * time.Hour

// pruneStaged removes staged copies older than stagedKeep; errors are ignored
// (the next call tries again).
func (w *workspace) pruneStaged(now time.Time) {
	dir := w.outboxDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && e.IsDir() && strings.HasPrefix(e.Name(), "run-") && now.Sub(info.ModTime()) > stagedKeep {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// outboxDir is Options.OutboxDir, or "outbox-files" next to the workspace root.
func (w *workspace) outboxDir() string {
	if w.opts.OutboxDir != "" {
		return w.opts.OutboxDir
	}
	abs, err := filepath.Abs(w.opts.WorkspaceRoot)
	if err != nil {
		abs = w.opts.WorkspaceRoot
	}
	return filepath.Join(filepath.Dir(abs), "outbox-files")
}
