package console

import (
	"context"
	"strings"
	"testing"
)

// usageEngine is the fake engine with core.UsageReporter.
type usageEngine struct {
	fakeEngine
	keys []string
}

func (u *usageEngine) UsageReport(_ context.Context, key, bot string) (string, error) {
	u.keys = append(u.keys, key+"|"+bot)
	return "This thread: 1500 tokens, 0.002 USD in 1 calls", nil
}

// TestUsageCommand: /usage prints the engine's report for the console's
// current thread.
func TestUsageCommand(t *testing.T) {
	eng := &usageEngine{}
	var out syncBuffer
	a := newAdapter(t, eng, "/usage\n", &out)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "[system] This thread: 1500 tokens, 0.002 USD in 1 calls") {
		t.Errorf("output:\n%s", s)
	}
	if len(eng.keys) != 1 || eng.keys[0] != "console:dev|" {
		t.Errorf("reports asked = %q, want the console's thread key", eng.keys)
	}
}
