package agents

import (
	"context"
	"fmt"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// BenchmarkUnrollRender measures building a run's history from a long thread: the
// default budget over 2,000 messages, unscoped and scoped.
func BenchmarkUnrollRender(b *testing.B) {
	env := &fakeEnv{}
	for i := range 2000 {
		switch i % 3 {
		case 0:
			env.add(alice, "Alice", strings.Repeat("words ", 40))
		case 1:
			env.add(chief.ID(), "Chief", "@engineer "+strings.Repeat("task ", 30), "engineer")
		default:
			env.add(engineer.ID(), "Engineer", strings.Repeat("done ", 20))
		}
	}
	trig := env.add(alice, "Alice", "latest")
	lim := core.Limits{}.WithDefaults()
	for _, scoped := range []bool{false, true} {
		b.Run(fmt.Sprintf("scoped=%v", scoped), func(b *testing.B) {
			job := newJob(env, engineer, scoped, trig)
			for b.Loop() {
				v, err := unroll(context.Background(), job, lim)
				if err != nil {
					b.Fatal(err)
				}
				_ = render(v, job.Bot, lim.HistoryTokenBudget*4)
			}
		})
	}
}

// BenchmarkCallAssembler measures joining 2 interleaved tool calls of 200 deltas each.
func BenchmarkCallAssembler(b *testing.B) {
	var deltas []openai.ToolCall
	for i := range 400 {
		idx := i % 2
		d := openai.ToolCall{Index: &idx, Function: openai.FunctionCall{Arguments: "ab"}}
		if i < 2 {
			d.ID, d.Function.Name = fmt.Sprint("c", idx), "tool"
		}
		deltas = append(deltas, d)
	}
	for b.Loop() {
		var asm callAssembler
		for _, d := range deltas {
			asm.add(d)
		}
		if len(asm.calls()) != 2 {
			b.Fatal("want 2 calls")
		}
	}
}

func TestCallAssemblerWithoutIndex(t *testing.T) {
	// Some servers omit the index: a new id starts a new call, other deltas
	// continue the latest one; a repeated full name is not doubled.
	var asm callAssembler
	for _, d := range []openai.ToolCall{
		{ID: "x", Function: openai.FunctionCall{Name: "first", Arguments: `{"a":`}},
		{Function: openai.FunctionCall{Name: "first", Arguments: `1}`}},
		{ID: "y", Function: openai.FunctionCall{Name: "second"}},
	} {
		asm.add(d)
	}
	got := asm.calls()
	if len(got) != 2 {
		t.Fatalf("calls = %+v, want 2", got)
	}
	if got[0].ID != "x" || got[0].Function.Name != "first" || got[0].Function.Arguments != `{"a":1}` {
		t.Errorf("call 0 = %+v", got[0])
	}
	if got[1].ID != "y" || got[1].Function.Name != "second" || got[1].Function.Arguments != "{}" {
		t.Errorf("call 1 = %+v", got[1])
	}
}
