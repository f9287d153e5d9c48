package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"openbot/agents"
)

const (
	// listMax bounds the entries workspace_list returns.
	listMax = 1000
	// searchFileMax is the largest file workspace_search looks into.
	searchFileMax = 8 << 20
	// searchLineMax is how much of a matching line workspace_search shows.
	searchLineMax = 240
)

func workspaceReadTool(ws *workspace) agents.Tool {
	return &tool{
		name:   "workspace_read",
		reach:  ws.reach("reads"),
		repeat: always, // a read or a whole replacement
		desc: fmt.Sprintf("Read a text file from your workspace (a directory private to this thread). "+
			"Paths are relative to the workspace; absolute paths, \"..\" and links leading outside are refused. "+
			"At most %d bytes are returned per call; use offset to read further.", ws.opts.ReadCap),
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"File path relative to the workspace"},` +
			`"offset":{"type":"integer","minimum":0,"description":"Byte offset to start reading at (default 0)"}},` +
			`"required":["path"],"additionalProperties":false}`),
		fn: func(ctx context.Context, call agents.ToolCall) (string, error) {
			var a struct {
				Path   string `json:"path"`
				Offset int64  `json:"offset"`
			}
			if err := decodeArgs(call.Args, &a); err != nil {
				return "", err
			}
			if a.Path == "" {
				return "", errors.New("path is required")
			}
			root, _, rel, err := ws.open(call, a.Path)
			if err != nil {
				return "", err
			}
			defer root.Close()
			// Non-blocking, so a FIFO planted in the workspace cannot hang the
			// call: it is opened, found not regular and refused.
			f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				return "", rootErr(a.Path, err)
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return "", rootErr(a.Path, err)
			}
			if st.IsDir() {
				return "", fmt.Errorf("%q is a directory; use workspace_list", a.Path)
			}
			if !st.Mode().IsRegular() {
				return "", fmt.Errorf("%q is not a regular file", a.Path)
			}
			if err := checkLinks(a.Path, st); err != nil {
				return "", err
			}
			if a.Offset < 0 || (a.Offset > 0 && a.Offset >= st.Size()) {
				return "", fmt.Errorf("offset %d is past the end of %q (%d bytes)", a.Offset, a.Path, st.Size())
			}
			buf := make([]byte, min(ws.opts.ReadCap, max(st.Size()-a.Offset, 0))+1)
			n, err := f.ReadAt(buf, a.Offset)
			if err != nil && !errors.Is(err, io.EOF) {
				return "", rootErr(a.Path, err)
			}
			data := buf[:n]
			if bytes.IndexByte(data, 0) >= 0 {
				return fmt.Sprintf("%q is a binary file of %d bytes; it is not shown", a.Path, st.Size()), nil
			}
			if int64(n) > ws.opts.ReadCap || a.Offset+int64(n) < st.Size() {
				data = []byte(cutUTF8(string(data[:min(int64(n), ws.opts.ReadCap)])))
				end := a.Offset + int64(len(data))
				return fmt.Sprintf("%s\n[... truncated: bytes %d-%d of %d shown; call again with offset %d to read more ...]",
					data, a.Offset, end, st.Size(), end), nil
			}
			return string(data), nil
		},
	}
}

func workspaceWriteTool(ws *workspace) agents.Tool {
	return &tool{
		name:   "workspace_write",
		reach:  ws.reach("writes"),
		repeat: replaceOnly,
		desc: fmt.Sprintf("Write a text file in your workspace (a directory private to this thread), creating "+
			"parent directories. Replaces the file unless append is true. Paths are relative to the workspace; "+
			"absolute paths, \"..\" and links leading outside are refused. Content is limited to %d bytes.", ws.opts.WriteCap),
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"File path relative to the workspace"},` +
			`"content":{"type":"string","description":"The text to write"},` +
			`"append":{"type":"boolean","description":"Append to the file instead of replacing it"}},` +
			`"required":["path","content"],"additionalProperties":false}`),
		fn: func(ctx context.Context, call agents.ToolCall) (string, error) {
			var a struct {
				Path    string `json:"path"`
				Content string `json:"content"`
				Append  bool   `json:"append"`
			}
			if err := decodeArgs(call.Args, &a); err != nil {
				return "", err
			}
			if a.Path == "" {
				return "", errors.New("path is required")
			}
			if int64(len(a.Content)) > ws.opts.WriteCap {
				return "", fmt.Errorf("content is %d bytes; the limit is %d bytes: write it in parts with append", len(a.Content), ws.opts.WriteCap)
			}
			root, _, rel, err := ws.open(call, a.Path)
			if err != nil {
				return "", err
			}
			defer root.Close()
			if rel == "." {
				return "", errors.New("path names the workspace itself; give a file name")
			}
			if dir := filepath.Dir(rel); dir != "." {
				if err := root.MkdirAll(dir, 0o750); err != nil {
					return "", rootErr(a.Path, err)
				}
			}
			// Opened without O_TRUNC: the link count is checked on the open
			// file before anything changes, then it is truncated.
			// Non-blocking: a FIFO with no reader is refused at once (ENXIO)
			// instead of hanging the call.
			flag := os.O_WRONLY | os.O_CREATE | syscall.O_NONBLOCK
			if a.Append {
				flag |= os.O_APPEND
			}
			f, err := root.OpenFile(rel, flag, 0o640)
			if err != nil {
				return "", rootErr(a.Path, err)
			}
			if err := checkWritable(f, a.Path, a.Append, int64(len(a.Content)), ws.opts.WriteCap*16); err != nil {
				f.Close()
				return "", err
			}
			if _, err := io.WriteString(f, a.Content); err != nil {
				f.Close()
				return "", rootErr(a.Path, err)
			}
			if err := f.Close(); err != nil {
				return "", rootErr(a.Path, err)
			}
			verb := "wrote"
			if a.Append {
				verb = "appended"
			}
			return fmt.Sprintf("%s %d bytes to %s", verb, len(a.Content), filepath.ToSlash(rel)), nil
		},
	}
}

func workspaceListTool(ws *workspace) agents.Tool {
	return &tool{
		name:   "workspace_list",
		reach:  ws.reach("lists"),
		repeat: always, // a read or a whole replacement
		desc: fmt.Sprintf("List files and directories in your workspace (a directory private to this thread). "+
			"Directories end with \"/\"; files show their size. At most %d entries.", listMax),
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"Directory relative to the workspace (default: the workspace itself)"},` +
			`"recursive":{"type":"boolean","description":"Include subdirectories' contents"}},` +
			`"additionalProperties":false}`),
		fn: func(ctx context.Context, call agents.ToolCall) (string, error) {
			var a struct {
				Path      string `json:"path"`
				Recursive bool   `json:"recursive"`
			}
			if err := decodeArgs(call.Args, &a); err != nil {
				return "", err
			}
			root, base, rel, err := ws.open(call, a.Path)
			if err != nil {
				return "", err
			}
			defer root.Close()
			st, err := root.Stat(rel)
			if err != nil {
				return "", rootErr(a.Path, err)
			}
			if !st.IsDir() {
				if err := checkLinks(a.Path, st); err != nil {
					return "", err
				}
				return fmt.Sprintf("%s (%d bytes)", filepath.ToSlash(rel), st.Size()), nil
			}
			var lines []string
			truncated := false
			start := filepath.ToSlash(rel)
			err = fs.WalkDir(root.FS(), start, func(p string, d fs.DirEntry, err error) error {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					if p == start {
						return err
					}
					return nil // unreadable entry: skip
				}
				if p == start {
					return nil
				}
				if len(lines) >= listMax {
					truncated = true
					return fs.SkipAll
				}
				show := p
				if start != "." {
					show = strings.TrimPrefix(p, start+"/")
				}
				switch {
				case d.IsDir():
					lines = append(lines, show+"/")
					if !a.Recursive {
						return fs.SkipDir
					}
				case d.Type()&fs.ModeSymlink != 0:
					target, _ := root.Readlink(p)
					if _, err := resolve(base, p); err != nil {
						target = "(outside the workspace: not accessible)"
					}
					lines = append(lines, show+" -> "+target)
				default:
					info, ierr := d.Info()
					size := int64(0)
					if ierr == nil {
						size = info.Size()
						if checkLinks(p, info) != nil {
							lines = append(lines, show+" (hard link to a file that may be outside the workspace: not accessible)")
							return nil
						}
					}
					lines = append(lines, fmt.Sprintf("%s (%d bytes)", show, size))
				}
				return nil
			})
			if err != nil {
				return "", rootErr(a.Path, err)
			}
			if len(lines) == 0 {
				return "(empty)", nil
			}
			out := strings.Join(lines, "\n")
			if truncated {
				out += fmt.Sprintf("\n[... listing stopped at %d entries ...]", listMax)
			}
			return out, nil
		},
	}
}

func workspaceSearchTool(ws *workspace) agents.Tool {
	return &tool{
		name:   "workspace_search",
		reach:  ws.reach("searches"),
		repeat: always, // a read or a whole replacement
		desc: fmt.Sprintf("Search the text files of your workspace for a substring (or a regular expression "+
			"when regexp is true). Returns \"path:line: text\" for each match, at most %d matches.", ws.opts.SearchMaxResults),
		schema: json.RawMessage(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"Text to look for"},` +
			`"regexp":{"type":"boolean","description":"Treat pattern as a Go (RE2) regular expression"},` +
			`"ignore_case":{"type":"boolean","description":"Match case-insensitively"},` +
			`"path":{"type":"string","description":"Directory or file to search, relative to the workspace (default: all)"},` +
			`"glob":{"type":"string","description":"Only files whose name matches this glob, e.g. *.go"}},` +
			`"required":["pattern"],"additionalProperties":false}`),
		fn: func(ctx context.Context, call agents.ToolCall) (string, error) {
			var a struct {
				Pattern    string `json:"pattern"`
				Regexp     bool   `json:"regexp"`
				IgnoreCase bool   `json:"ignore_case"`
				Path       string `json:"path"`
				Glob       string `json:"glob"`
			}
			if err := decodeArgs(call.Args, &a); err != nil {
				return "", err
			}
			if a.Pattern == "" {
				return "", errors.New("pattern is required")
			}
			expr := a.Pattern
			if !a.Regexp {
				expr = regexp.QuoteMeta(expr)
			}
			if a.IgnoreCase {
				expr = "(?i)" + expr
			}
			re, err := regexp.Compile(expr)
			if err != nil {
				return "", fmt.Errorf("invalid regular expression: %v", err)
			}
			if a.Glob != "" {
				if _, err := path.Match(a.Glob, ""); err != nil {
					return "", fmt.Errorf("invalid glob %q: %v", a.Glob, err)
				}
			}
			root, _, rel, err := ws.open(call, a.Path)
			if err != nil {
				return "", err
			}
			defer root.Close()
			if _, err := root.Stat(rel); err != nil {
				return "", rootErr(a.Path, err)
			}
			s := searcher{root: root, re: re, glob: a.Glob, max: ws.opts.SearchMaxResults}
			err = fs.WalkDir(root.FS(), filepath.ToSlash(rel), func(p string, d fs.DirEntry, err error) error {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil || d.IsDir() || !d.Type().IsRegular() {
					return nil
				}
				return s.file(p)
			})
			if err != nil && !errors.Is(err, fs.SkipAll) {
				return "", rootErr(a.Path, err)
			}
			if len(s.out) == 0 {
				return "no matches", nil
			}
			out := strings.Join(s.out, "\n")
			if s.full {
				out += fmt.Sprintf("\n[... stopped at %d matches; narrow the search with path or glob ...]", s.max)
			}
			return out, nil
		},
	}
}

type searcher struct {
	root *os.Root
	re   *regexp.Regexp
	glob string
	max  int
	out  []string
	full bool
}

// file appends the matches of one file; it returns fs.SkipAll when full.
func (s *searcher) file(p string) error {
	if s.glob != "" {
		if ok, _ := path.Match(s.glob, path.Base(p)); !ok {
			return nil
		}
	}
	f, err := s.root.Open(filepath.FromSlash(p))
	if err != nil {
		return nil // e.g. a link leading outside: skipped
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() > searchFileMax || checkLinks(p, st) != nil {
		return nil // hard links are skipped: they may point outside
	}
	br := bufio.NewReader(f)
	if head, _ := br.Peek(512); bytes.IndexByte(head, 0) >= 0 {
		return nil // binary
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if !s.re.MatchString(text) {
			continue
		}
		if len(s.out) >= s.max {
			s.full = true
			return fs.SkipAll
		}
		if len(text) > searchLineMax {
			text = cutUTF8(text[:searchLineMax]) + "…"
		}
		s.out = append(s.out, fmt.Sprintf("%s:%d: %s", p, line, text))
	}
	return nil
}

// checkWritable checks a file workspace_write opened without O_TRUNC: it must
// be a regular file with one link (ErrHardLink otherwise), and an append must
// not grow it past maxSize. When not appending it is then truncated.
func checkWritable(f *os.File, name string, appending bool, add, maxSize int64) error {
	st, err := f.Stat()
	if err != nil {
		return rootErr(name, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%q is not a regular file", name)
	}
	if err := checkLinks(name, st); err != nil {
		return err
	}
	if appending {
		if st.Size()+add > maxSize {
			return fmt.Errorf("%q would grow past %d bytes", name, maxSize)
		}
		return nil
	}
	if err := f.Truncate(0); err != nil {
		return rootErr(name, err)
	}
	return nil
}

// replaceOnly is workspace_write's repeat rule: writing the same content again
// leaves the same file, appending it again does not. Unreadable arguments are
// not safe.
func replaceOnly(args json.RawMessage) bool {
	var a struct {
		Append *bool `json:"append"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return false
	}
	return a.Append == nil || !*a.Append
}
