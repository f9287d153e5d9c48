package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"openbot/agents"
)

var _ agents.CallReacher = (*shell)(nil)

// CallReach is what the approval prompt of one shell call says
// (agents.CallReacher): the shell's Reach sentence for the bot, the timeout this
// call gets, and ShellWarnings of its command. Arguments it cannot read get the
// Reach sentence and the default timeout; the call itself will then fail
// without running anything.
func (s *shell) CallReach(bot string, args json.RawMessage) (string, []string) {
	var a struct {
		Command        string `json:"command"`
		TimeoutSeconds int64  `json:"timeout_seconds"`
	}
	if decodeArgs(args, &a) != nil {
		a.Command, a.TimeoutSeconds = "", 0
	}
	reach := strings.TrimSpace(s.Reach(bot))
	if reach != "" && !strings.HasSuffix(reach, ".") {
		reach += "."
	}
	timeout := s.sb.opts.limitsFor(bot).timeoutFor(a.TimeoutSeconds)
	return strings.TrimSpace(reach + " Timeout: " + seconds(timeout) + "."), ShellWarnings(a.Command)
}

// seconds says d in whole seconds ("60 s"), or as Go writes it when it is not a
// whole number of seconds.
func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return d.String()
}
