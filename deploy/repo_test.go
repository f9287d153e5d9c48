package deploy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unshipped matches a citation of a design document the repository does not
// ship: DESIGN.md, the seed, or a bare section sign.
var unshipped = regexp.MustCompile(`DESIGN\.md|\bseed\b[^.\n]*§|§\s*\d`)

// TestNoCitationOfUnshippedDocuments: text a person reads (the README, the
// example config, the docs under docs/ other than the architecture notes, and
// every string literal of the product's Go code: errors, notices, tool
// descriptions, pages) never cites a document the repository does not ship.
// Comments may.
func TestNoCitationOfUnshippedDocuments(t *testing.T) {
	root := ".."
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, p := range append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "config.example.yaml")) {
		if filepath.Base(p) == "ARCHITECTURE.md" {
			continue // notes for developers on where the code and the design differ
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if unshipped.MatchString(line) {
				t.Errorf("%s:%d cites an unshipped document: %s", p, i+1, strings.TrimSpace(line))
			}
		}
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && unshipped.MatchString(lit.Value) {
				t.Errorf("%s cites an unshipped document in a string: %.120s", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMakeBuildsAVersionedBinary: `make` builds a stripped binary whose
// `openbot version` prints the version it was given, the commit and the Go
// version.
func TestMakeBuildsAVersionedBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on this machine")
	}
	out := filepath.Join(t.TempDir(), "openbot")
	cmd := exec.Command("make", "-C", "..", "build", "VERSION=9.8.7-test", "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make: %v\n%s", err, b)
	}
	b, err := exec.Command(out, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("openbot version: %v\n%s", err, b)
	}
	if v := string(b); !strings.HasPrefix(v, "openbot 9.8.7-test ") || !strings.Contains(v, "go1.") {
		t.Errorf("openbot version = %q, want the version given to make and the Go version", v)
	}
}

// TestReadmeQuickStart: the README's quick start fits on one screen and shows
// the two commands first (run, then test); each openbot command it shows is
// one of those the cmd/openbot tests run as a newcomer would (chat with no
// config: TestChatWithoutConfigRunsTheBuiltInExample; init and serve:
// TestInitToAnswers; ./cmd/start itself: TestStartSaysSoThenRunsOpenbot).
func TestReadmeQuickStart(t *testing.T) {
	readme := readFile(t, "README.md")
	i := strings.Index(readme, "## Quick start\n")
	if i < 0 {
		t.Fatal("README.md has no Quick start section")
	}
	section := readme[i:]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	if n := strings.Count(section, "\n"); n > 40 {
		t.Errorf("the quick start is %d lines; it must fit on one screen (40)", n)
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 2 || !strings.Contains(blocks[0][1], "go run ./cmd/start chat") || strings.TrimSpace(blocks[1][1]) != "go test -race ./..." {
		t.Fatalf("the quick start's first two commands must run the product and the tests:\n%s", section)
	}
	tested := map[string]bool{"chat": true, "init": true, "serve": true}
	for _, m := range regexp.MustCompile(`go run ./cmd/start (\S+)`).FindAllStringSubmatch(section, -1) {
		if !tested[m[1]] {
			t.Errorf("the quick start shows `openbot %s`, which no test runs as a newcomer would", m[1])
		}
	}
}
