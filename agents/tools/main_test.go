package tools

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the shell's sandbox helper.
func TestMain(m *testing.M) {
	MaybeRunHelper()
	os.Exit(m.Run())
}
