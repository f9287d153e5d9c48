package agents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func stubTool(name string) *FuncTool {
	return &FuncTool{ToolName: name, Desc: "stub " + name, Fn: func(context.Context, ToolCall) (string, error) {
		return name, nil
	}}
}

func toolNames(ts []Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name()
	}
	return out
}

func TestRegistryAdd(t *testing.T) {
	r := NewRegistry()
	if err := r.Add(stubTool("shell")); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(stubTool("shell")); !errors.Is(err, ErrDuplicateTool) {
		t.Errorf("second Add = %v, want ErrDuplicateTool", err)
	}
	for _, bad := range []string{"", "has space", "dot.name", strings.Repeat("x", 65)} {
		if err := r.Add(stubTool(bad)); !errors.Is(err, ErrInvalidToolName) {
			t.Errorf("Add(%q) = %v, want ErrInvalidToolName", bad, err)
		}
	}
	if !r.Remove("shell") || r.Remove("shell") {
		t.Error("Remove should report true then false")
	}
	if _, ok := r.Get("shell"); ok {
		t.Error("removed tool still there")
	}
}

func TestRegistrySelect(t *testing.T) {
	r := NewRegistry()
	for _, n := range []string{"shell", "http_fetch"} {
		if err := r.Add(stubTool(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.SetSource("gh", []Tool{stubTool("gh__pr"), stubTool("gh__issue")}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetSource("fs", []Tool{stubTool("fs__read")}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		names   []string
		want    []string
		unknown string
	}{
		{names: []string{"shell"}, want: []string{"shell"}},
		{names: []string{"gh"}, want: []string{"gh__issue", "gh__pr"}},
		{names: []string{"gh__*", "shell"}, want: []string{"gh__issue", "gh__pr", "shell"}},
		{names: []string{"gh__pr", "gh"}, want: []string{"gh__pr", "gh__issue"}},
		{names: []string{"shell", "nope", "zz__*"}, want: []string{"shell"}, unknown: "nope, zz__*"},
		{names: []string{"g"}, want: nil, unknown: "g"},
		{names: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.names), func(t *testing.T) {
			got, err := r.Select(tt.names)
			if !slices.Equal(toolNames(got), tt.want) {
				t.Errorf("Select = %v, want %v", toolNames(got), tt.want)
			}
			switch {
			case tt.unknown == "" && err != nil:
				t.Errorf("err = %v", err)
			case tt.unknown != "" && (!errors.Is(err, ErrUnknownTool) || !strings.Contains(err.Error(), tt.unknown)):
				t.Errorf("err = %v, want ErrUnknownTool naming %q", err, tt.unknown)
			}
		})
	}
}

func TestRegistrySetSource(t *testing.T) {
	r := NewRegistry()
	if err := r.Add(stubTool("gh__builtin")); err != nil {
		t.Fatal(err)
	}
	if err := r.SetSource("gh", []Tool{stubTool("gh__builtin")}); !errors.Is(err, ErrDuplicateTool) {
		t.Errorf("collision with a non-source tool = %v, want ErrDuplicateTool", err)
	}
	if err := r.SetSource("gh", []Tool{stubTool("other__x")}); !errors.Is(err, ErrInvalidToolName) {
		t.Errorf("foreign prefix = %v, want ErrInvalidToolName", err)
	}
	if err := r.SetSource("gh", []Tool{stubTool("gh__a"), stubTool("gh__a")}); !errors.Is(err, ErrDuplicateTool) {
		t.Errorf("duplicate in list = %v, want ErrDuplicateTool", err)
	}
	if err := r.SetSource("gh", []Tool{stubTool("gh__a"), stubTool("gh__b")}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetSource("gh", []Tool{stubTool("gh__b"), stubTool("gh__c")}); err != nil {
		t.Fatal(err)
	}
	if got, want := r.Names(), []string{"gh__b", "gh__builtin", "gh__c"}; !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if err := r.SetSource("gh", nil); err != nil {
		t.Fatal(err)
	}
	if got, want := r.Names(), []string{"gh__builtin"}; !slices.Equal(got, want) {
		t.Errorf("Names after clearing = %v, want %v", got, want)
	}
}

// TestRegistryConcurrent replaces a source while selecting; run with -race.
func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 200 {
			_ = r.SetSource("mcp", []Tool{stubTool(fmt.Sprintf("mcp__t%d", i%3))})
		}
	}()
	go func() {
		defer wg.Done()
		for range 200 {
			got, err := r.Select([]string{"mcp"})
			if err == nil && len(got) != 1 {
				t.Errorf("Select = %v", toolNames(got))
				return
			}
		}
	}()
	wg.Wait()
}
