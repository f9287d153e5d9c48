// The layering test stays at the module root on purpose: it checks the import
// graph of the whole module (`go list ./...` from here), not of one package, so
// its home is the one directory that stands for the module. Under internal/ it
// would read as a helper of some package; the end-to-end tests, which are about
// behaviour, live in e2e/.
package openbot_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// pkg is one package of the module as `go list` reports it.
type pkg struct {
	path    string
	deps    []string // transitive, non-test
	imports []string // direct, including test files
}

// layering returns every violation of the package rules of DESIGN.md §2 and
// STYLE.md ("core imports no SDK; adapters import no other adapter, no agents, no
// store"), one line each, sorted.
//   - openbot/core... depends on no platform SDK, bbolt, go-openai, the Anthropic
//     SDK or mcp-go and on no openbot/adapters, agents, store, config or admin
//     package;
//   - openbot/adapters/X... depends on no openbot/agents, store, config or admin
//     package and on no other adapter (openbot/adapters/internal/... is shared,
//     not an adapter);
//   - only openbot/store/... imports go.etcd.io/bbolt or pgx directly;
//   - only openbot/adapters/feishu/... imports the Feishu/Lark SDK
//     (github.com/larksuite/oapi-sdk-go) directly.
func layering(pkgs []pkg) []string {
	var out []string
	coreBanned := []string{
		"github.com/slack-go/slack", "github.com/go-telegram-bot-api/telegram-bot-api",
		"go.etcd.io/bbolt", "github.com/jackc/pgx", "github.com/sashabaranov/go-openai", "github.com/anthropics/anthropic-sdk-go", "github.com/mark3labs/mcp-go",
		"github.com/larksuite/oapi-sdk-go", "openbot/adapters", "openbot/agents", "openbot/store", "openbot/config", "openbot/admin",
	}
	adapterBanned := []string{"openbot/agents", "openbot/store", "openbot/config", "openbot/admin"}
	for _, p := range pkgs {
		switch {
		case within(p.path, "openbot/core"):
			for _, d := range p.deps {
				for _, b := range coreBanned {
					if within(d, b) {
						out = append(out, fmt.Sprintf("%s depends on %s", p.path, d))
					}
				}
			}
		case within(p.path, "openbot/adapters"):
			own := adapterRoot(p.path)
			for _, d := range p.deps {
				for _, b := range adapterBanned {
					if within(d, b) {
						out = append(out, fmt.Sprintf("%s depends on %s", p.path, d))
					}
				}
				if within(d, "openbot/adapters") && adapterRoot(d) != own && !within(d, sharedByAdapters) {
					out = append(out, fmt.Sprintf("%s depends on another adapter %s", p.path, d))
				}
			}
		}
		if !within(p.path, "openbot/store") {
			for _, imp := range p.imports {
				if within(imp, "go.etcd.io/bbolt") || within(imp, "github.com/jackc/pgx/v5") {
					out = append(out, fmt.Sprintf("%s imports %s (only openbot/store may)", p.path, imp))
				}
			}
		}
		if !within(p.path, "openbot/adapters/feishu") {
			for _, imp := range p.imports {
				if strings.HasPrefix(imp, "github.com/larksuite/oapi-sdk-go") {
					out = append(out, fmt.Sprintf("%s imports %s (only openbot/adapters/feishu may)", p.path, imp))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// sharedByAdapters holds what the adapters do the same way (streaming a reply,
// the fakes' server base); it is no adapter and imports none.
const sharedByAdapters = "openbot/adapters/internal"

// within reports whether path is prefix or a package below it.
func within(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// adapterRoot is "openbot/adapters/<name>" for any package under it.
func adapterRoot(path string) string {
	parts := strings.SplitN(path, "/", 4)
	if len(parts) < 3 {
		return path
	}
	return strings.Join(parts[:3], "/")
}

func TestLayering(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	const sep = "\x1f"
	cmd := exec.Command(gobin, "list", "-e", "-f",
		`{{.ImportPath}}`+sep+`{{join .Deps " "}}`+sep+`{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`,
		"./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), sep)
		if len(f) != 3 {
			t.Fatalf("unexpected go list line %q", sc.Text())
		}
		pkgs = append(pkgs, pkg{path: f[0], deps: strings.Fields(f[1]), imports: strings.Fields(f[2])})
	}
	if len(pkgs) == 0 || !hasPkg(pkgs, "openbot/core") {
		t.Fatalf("go list found no openbot/core among %d packages", len(pkgs))
	}
	for _, v := range layering(pkgs) {
		t.Error(v)
	}
}

func hasPkg(pkgs []pkg, path string) bool {
	for _, p := range pkgs {
		if p.path == path {
			return true
		}
	}
	return false
}

// TestLayeringRules shows that each rule fires, so TestLayering can fail.
func TestLayeringRules(t *testing.T) {
	tests := []struct {
		name string
		p    pkg
		want string
	}{
		{"core on slack", pkg{path: "openbot/core", deps: []string{"context", "github.com/slack-go/slack"}}, "openbot/core depends on github.com/slack-go/slack"},
		{"core on telegram", pkg{path: "openbot/core", deps: []string{"github.com/go-telegram-bot-api/telegram-bot-api/v5"}}, "openbot/core depends on github.com/go-telegram-bot-api/telegram-bot-api/v5"},
		{"core on bbolt", pkg{path: "openbot/core", deps: []string{"go.etcd.io/bbolt"}}, "openbot/core depends on go.etcd.io/bbolt"},
		{"core on openai", pkg{path: "openbot/core", deps: []string{"github.com/sashabaranov/go-openai"}}, "openbot/core depends on github.com/sashabaranov/go-openai"},
		{"core on mcp", pkg{path: "openbot/core", deps: []string{"github.com/mark3labs/mcp-go/client"}}, "openbot/core depends on github.com/mark3labs/mcp-go/client"},
		{"core sub on store", pkg{path: "openbot/core/storetest", deps: []string{"openbot/store/bolt"}}, "openbot/core/storetest depends on openbot/store/bolt"},
		{"core on config", pkg{path: "openbot/core", deps: []string{"openbot/config"}}, "openbot/core depends on openbot/config"},
		{"core on adapter", pkg{path: "openbot/core", deps: []string{"openbot/adapters/console"}}, "openbot/core depends on openbot/adapters/console"},
		{"core on agents", pkg{path: "openbot/core", deps: []string{"openbot/agents"}}, "openbot/core depends on openbot/agents"},
		{"adapter on agents", pkg{path: "openbot/adapters/slack", deps: []string{"openbot/core", "openbot/agents/tools"}}, "openbot/adapters/slack depends on openbot/agents/tools"},
		{"adapter on store", pkg{path: "openbot/adapters/telegram", deps: []string{"openbot/store/bolt"}}, "openbot/adapters/telegram depends on openbot/store/bolt"},
		{"adapter on config", pkg{path: "openbot/adapters/console", deps: []string{"openbot/config"}}, "openbot/adapters/console depends on openbot/config"},
		{"adapter on adapter", pkg{path: "openbot/adapters/feishu", deps: []string{"openbot/adapters/slack"}}, "openbot/adapters/feishu depends on another adapter openbot/adapters/slack"},
		{"core on lark", pkg{path: "openbot/core", deps: []string{"github.com/larksuite/oapi-sdk-go/v3/core"}}, "openbot/core depends on github.com/larksuite/oapi-sdk-go/v3/core"},
		{"lark outside feishu", pkg{path: "openbot/adapters/slack", imports: []string{"github.com/larksuite/oapi-sdk-go/v3/service/im/v1"}}, "openbot/adapters/slack imports github.com/larksuite/oapi-sdk-go/v3/service/im/v1 (only openbot/adapters/feishu may)"},
		{"bbolt outside store", pkg{path: "openbot/cmd/openbot", imports: []string{"go.etcd.io/bbolt"}}, "openbot/cmd/openbot imports go.etcd.io/bbolt (only openbot/store may)"},
		{"core on pgx", pkg{path: "openbot/core", deps: []string{"github.com/jackc/pgx/v5"}}, "openbot/core depends on github.com/jackc/pgx/v5"},
		{"pgx outside store", pkg{path: "openbot/cmd/openbot", imports: []string{"github.com/jackc/pgx/v5/pgxpool"}}, "openbot/cmd/openbot imports github.com/jackc/pgx/v5/pgxpool (only openbot/store may)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := layering([]pkg{tt.p})
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("layering = %q, want [%q]", got, tt.want)
			}
		})
	}
	allowed := []pkg{
		{path: "openbot/core", deps: []string{"context", "log/slog"}},
		{path: "openbot/adapters/slack/slacktest", deps: []string{"openbot/adapters/slack", "openbot/core", "github.com/slack-go/slack"}},
		{path: "openbot/adapters/telegram", deps: []string{"openbot/adapters/internal/stream", "openbot/core"}},
		{path: "openbot/store/bolt", deps: []string{"go.etcd.io/bbolt", "openbot/core"}, imports: []string{"go.etcd.io/bbolt"}},
		{path: "openbot/store/postgres", deps: []string{"github.com/jackc/pgx/v5", "openbot/core"}, imports: []string{"github.com/jackc/pgx/v5/pgxpool"}},
		{path: "openbot/cmd/openbot", deps: []string{"openbot/store/bolt", "go.etcd.io/bbolt", "openbot/agents", "openbot/config"}, imports: []string{"openbot/store/bolt"}},
		{path: "openbot/agents", deps: []string{"github.com/sashabaranov/go-openai", "openbot/core"}},
		{path: "openbot/adapters/feishu", deps: []string{"openbot/core", "github.com/larksuite/oapi-sdk-go/v3/core"}, imports: []string{"github.com/larksuite/oapi-sdk-go/v3/service/im/v1"}},
	}
	if got := layering(allowed); len(got) != 0 {
		t.Errorf("allowed graph reported %q", got)
	}
}
