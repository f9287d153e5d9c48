package main

import (
	"os/exec"
	"strings"
	"testing"
)

// productBanned are packages the openbot binary must not link: the tools live
// beside the product (STYLE.md). The benchmarks are _test.go files of this
// package; the platform and model fakes, httptest and the profiler are theirs.
var productBanned = []string{
	"net/http/httptest",
	"runtime/pprof",
	"github.com/chromedp/",
	"openbot/adapters/slack/slacktest",
	"openbot/adapters/telegram/telegramtest",
	"openbot/adapters/feishu/feishutest",
	"openbot/agents/openaitest",
	"openbot/store/postgres/pgtest",
}

// TestProductLinksNoTools: the product binary's packages (go list -deps of
// cmd/openbot, test files not included) hold no benchmark, fake or profiler.
func TestProductLinksNoTools(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range productBanned {
			if dep == banned || strings.HasPrefix(dep, banned) {
				t.Errorf("the openbot binary links %s", dep)
			}
		}
	}
}
