// Package golden runs golden-file tests of text converters, the formatters'
// "testdata/ golden files" of STYLE.md: every input file is converted and the
// output compared with the golden file next to it. Run the tests with -update
// to rewrite the goldens after a change, then review the diff. It is an
// ordinary package imported only by tests.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files instead of comparing with them")

// Run converts every dir/*<inExt> file with convert, in a subtest named after
// the file, and compares the result with the file of the same name ending in
// outExt (extensions with their dot, e.g. ".md", ".html"). Each check then
// runs on the converted text. It fails the test when dir holds no input, and
// a subtest when its golden file is missing or differs.
func Run(t *testing.T, dir, inExt, outExt string, convert func(string) string, checks ...func(t *testing.T, got string)) {
	t.Helper()
	inputs, err := filepath.Glob(filepath.Join(dir, "*"+inExt))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs in %s: %v", dir, err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), inExt)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := convert(string(src))
			golden := strings.TrimSuffix(in, inExt) + outExt
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("convert(%s) mismatch\n--- got ---\n%s\n--- want ---\n%s", in, got, want)
			}
			for _, check := range checks {
				check(t, got)
			}
		})
	}
}
