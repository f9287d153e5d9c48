package agents

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"openbot/agents/openaitest"
	"openbot/core"
)

// gatedTool says what it reaches and needs approval for calls with "write": true.
type gatedTool struct{ *FuncTool }

func (gatedTool) Reach(string) string { return "runs in the sandbox with network off" }
func (gatedTool) NeedsApproval(_ core.BotProfile, args json.RawMessage) bool {
	var a struct{ Write bool }
	return json.Unmarshal(args, &a) != nil || a.Write
}

// TestToolReachAndPerCallApproval: a tool's Reach sentence goes on the pause; a
// CallApprover's call that needs approval pauses although the tool is not in
// approval_tools, and one that does not runs at once.
func TestToolReachAndPerCallApproval(t *testing.T) {
	for _, tt := range []struct {
		name, args string
		approval   []string
		wantPause  bool
	}{
		{"listed tool", `{"write":false}`, []string{"store"}, true},
		{"call that writes", `{"write":true}`, nil, true},
		{"unreadable args", `{"write":"yes"}`, nil, true},
		{"call that reads", `{"write":false}`, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.New(t)
			srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "store", Arguments: tt.args}), openaitest.Text("done"))
			ran := 0
			reg := NewRegistry()
			if err := reg.Add(gatedTool{&FuncTool{ToolName: "store", Fn: func(context.Context, ToolCall) (string, error) {
				ran++
				return "ok", nil
			}}}); err != nil {
				t.Fatal(err)
			}
			bot := engineer
			bot.Tools, bot.ApprovalTools = []string{"store"}, tt.approval
			env := &fakeEnv{}
			res, err := execute(t, newAgent(t, srv, reg, nil), newJob(env, bot, false, env.add(alice, "Alice", "save it")))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.wantPause && (res.Pause == nil || res.Pause.Reach != "runs in the sandbox with network off" || ran != 0):
				t.Fatalf("pause = %+v, ran %d; want a pause with the reach and nothing run", res.Pause, ran)
			case !tt.wantPause && (res.Pause != nil || ran != 1 || !strings.Contains(res.Reply, "done")):
				t.Fatalf("result = %+v, ran %d; want the call run at once", res, ran)
			}
		})
	}
}

var _ interface {
	Reacher
	CallApprover
} = gatedTool{}

// TestBuiltinToolsSayWhatTheyReach: the tools every bot has (read_history,
// recall_messages, ask_human) implement Reacher with a sentence, so listing
// one in approval_tools still tells the approver what it can reach.
func TestBuiltinToolsSayWhatTheyReach(t *testing.T) {
	for _, tl := range BuiltinTools() {
		r, ok := tl.(Reacher)
		if !ok {
			t.Errorf("%s does not implement Reacher", tl.Name())
		} else if got := r.Reach("engineer"); !strings.Contains(got, "this thread") {
			t.Errorf("%s: Reach %q; want a sentence about this thread", tl.Name(), got)
		}
	}
}

// callReachTool says what each call reaches, and panics for "boom".
type callReachTool struct{ gatedTool }

func (callReachTool) CallReach(_ string, args json.RawMessage) (string, []string) {
	var a struct{ Path string }
	_ = json.Unmarshal(args, &a)
	if a.Path == "boom" {
		panic("cannot read")
	}
	return "writes " + a.Path, []string{"writes outside the workspace"}
}

// TestCallReachIsPreferred: a CallReacher's answer for the call's own arguments
// goes on the pause, its warnings with it, instead of the tool's Reach; a
// CallReach that panics falls back to Reach with a warning to read with care.
func TestCallReachIsPreferred(t *testing.T) {
	for _, tt := range []struct {
		args, reach, warning string
	}{
		{`{"path":"/etc/x"}`, "writes /etc/x", "writes outside the workspace"},
		{`{"path":"boom"}`, "runs in the sandbox with network off", "could not check these arguments"},
	} {
		srv := openaitest.New(t)
		srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "store", Arguments: tt.args}), openaitest.Text("done"))
		reg := NewRegistry()
		if err := reg.Add(callReachTool{gatedTool{&FuncTool{ToolName: "store", Fn: func(context.Context, ToolCall) (string, error) { return "ok", nil }}}}); err != nil {
			t.Fatal(err)
		}
		bot := engineer
		bot.Tools, bot.ApprovalTools = []string{"store"}, []string{"store"}
		env := &fakeEnv{}
		res, err := execute(t, newAgent(t, srv, reg, nil), newJob(env, bot, false, env.add(alice, "Alice", "save it")))
		if err != nil {
			t.Fatal(err)
		}
		if p := res.Pause; p == nil || p.Reach != tt.reach || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], tt.warning) {
			t.Errorf("args %s: pause = %+v; want reach %q and a warning %q", tt.args, p, tt.reach, tt.warning)
		}
	}
}
