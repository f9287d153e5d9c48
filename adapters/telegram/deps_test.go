package telegram

import (
	"os/exec"
	"strings"
	"testing"

	"openbot/core"
)

// The real engine is what cmd passes as Options.Engine.
var _ Engine = (*core.Engine)(nil)

// TestImports keeps the layering honest (STYLE.md "Packages and files"): the adapter
// imports core, the pure markdown scanner and internal helpers (internal/lru,
// adapters/internal/stream), the standard library and SDKs, never agents, store,
// config or another adapter.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, "openbot/") {
			continue
		}
		if p != "openbot/core" && p != "openbot/markdown" && p != "openbot/adapters/telegram" && !strings.HasPrefix(p, "openbot/internal/") && !strings.HasPrefix(p, "openbot/adapters/internal/") {
			t.Errorf("adapters/telegram depends on %s", p)
		}
	}
}
