package mcp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// errExited is wrapped into a session's error when its stdio server exited with
// status 0.
var errExited = errors.New("the server exited")

// urlRE finds URLs in error text; they may carry credentials (DESIGN.md §9).
var urlRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`) })

// reason says in words why a server failed, for a notice in a chat thread or a
// line in the terminal: no stderr, no URLs, nothing secret. The log keeps the
// full error.
func reason(err error, startTimeout time.Duration) string {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return "its command was not found"
	case errors.Is(err, fs.ErrPermission):
		return "its command may not be run (permission denied)"
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("it did not answer within %s", startTimeout)
	case errors.As(err, &exit):
		if exit.ExitCode() < 0 {
			return fmt.Sprintf("it was stopped (%s)", exit.ProcessState.String())
		}
		return fmt.Sprintf("it exited with status %d (its error output is in the openbot log)", exit.ExitCode())
	case errors.Is(err, errExited):
		return "it exited (its error output is in the openbot log)"
	case errors.Is(err, transport.ErrUnauthorized):
		return "it refused openbot's credentials (401 Unauthorized)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "nothing answers at its URL (connection refused)"
	case errors.Is(err, transport.ErrLegacySSEServer):
		return "it speaks only the older SSE transport, which openbot does not support"
	}
	s := err.Error()
	s, _, _ = strings.Cut(s, "; stderr:")
	s, _, _ = strings.Cut(s, "\n")
	s = urlRE().ReplaceAllString(s, "<url>")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return "it failed: " + s
}
