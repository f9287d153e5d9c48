package agents

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"openbot/agents/openaitest"
)

// TestToolResultEventCarriesResult checks that the tool_result run event keeps
// its measurements and adds the result text the model got, capped for the log
// with a note of the full size.
func TestToolResultEventCarriesResult(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.Calls(
			openaitest.ToolCall{ID: "c1", Name: "small", Arguments: `{}`},
			openaitest.ToolCall{ID: "c2", Name: "big", Arguments: `{}`},
			openaitest.ToolCall{ID: "c3", Name: "missing", Arguments: `{}`},
		),
		openaitest.Text("done"),
	)
	big := strings.Repeat("é", 3000) // 6000 bytes, two per rune
	reg := NewRegistry()
	for name, out := range map[string]string{"small": "forty-two", "big": big} {
		if err := reg.Add(&FuncTool{ToolName: name, Desc: name,
			Params: json.RawMessage(`{"type":"object"}`),
			Fn:     func(context.Context, ToolCall) (string, error) { return out, nil }}); err != nil {
			t.Fatal(err)
		}
	}
	bot := engineer
	bot.Tools = []string{"small", "big"}
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "@engineer go", "engineer")
	if _, err := execute(t, newAgent(t, srv, reg, nil), newJob(env, bot, false, trig)); err != nil {
		t.Fatal(err)
	}

	byID := map[string]map[string]any{}
	env.Mu.Lock()
	for _, ev := range env.Events {
		if ev.Type == "tool_result" {
			byID[ev.Payload["id"].(string)] = ev.Payload
		}
	}
	env.Mu.Unlock()
	if len(byID) != 3 {
		t.Fatalf("tool_result events = %v", byID)
	}
	for id, ev := range byID {
		for _, k := range []string{"name", "duration_ms", "chars", "error", "result", "result_bytes"} {
			if _, ok := ev[k]; !ok {
				t.Errorf("%s: tool_result event lacks %q: %v", id, k, ev)
			}
		}
	}

	small := byID["c1"]
	if small["result"] != `<untrusted source="tool:small">forty-two</untrusted>` || small["error"] != false || small["chars"] != float64(9) {
		t.Errorf("small tool_result event = %v", small)
	}

	bigEv := byID["c2"]
	res, _ := bigEv["result"].(string)
	full := int(bigEv["result_bytes"].(float64))
	if full <= eventResultCap || full < len(big) {
		t.Errorf("big result_bytes = %d, want the full size (> %d)", full, len(big))
	}
	head, note, ok := strings.Cut(res, "\n[cut for the event log:")
	if !ok || len(head) > eventResultCap || len(head) < eventResultCap-1 || !strings.HasPrefix(head, `<untrusted source="tool:big">éé`) {
		t.Errorf("big result not capped at %d bytes with a note: %d bytes, note %v", eventResultCap, len(head), ok)
	}
	if want := " the first 2000 of " + strconv.Itoa(full) + " bytes]"; note != want {
		t.Errorf("cut note = %q, want %q", note, want)
	}
	if !utf8.ValidString(res) {
		t.Errorf("big result cut inside a rune: %q", res[len(res)-80:])
	}

	missing := byID["c3"]
	if missing["error"] != true || !strings.Contains(missing["result"].(string), `there is no tool named "missing"`) {
		t.Errorf("missing tool_result event = %v", missing)
	}
}
