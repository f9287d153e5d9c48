package check

import (
	"errors"
	"testing"

	"openbot/core"
)

func TestRejectsWhatEitherStoreCannotHold(t *testing.T) {
	tests := []struct {
		name string
		err  error
		ok   bool
	}{
		{"actor", Actor(core.Actor{ID: "slack:U1"}), true},
		{"system actor", Actor(core.Actor{ID: core.SystemActor}), false},
		{"bot", Bot(core.BotProfile{Handle: "ada"}), true},
		{"bot handle with NUL", Bot(core.BotProfile{Handle: "a\x00"}), false},
		{"item without thread", Item(core.InboxItem{Actor: "bot:ada", Kind: "message", Status: core.ItemQueued}), false},
		{"run status with NUL", Run(core.Run{Bot: "ada", Thread: 1, Status: "x\x00"}), false},
		{"cursor", Cursor("telegram:1", ""), true},
		{"cursor value with NUL", Cursor("telegram:1", "\x00"), false},
		{"question token too long", Question(core.Question{Status: core.QuestionPending, Token: "12345678901234567", Run: 1, Thread: 1, Bot: "ada"}), false},
		{"lease without owner", Lease(core.Lease{Key: "ingress"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err == nil; got != tt.ok {
				t.Fatalf("accepted = %v, want %v (err %v)", got, tt.ok, tt.err)
			}
			if tt.err != nil && !errors.Is(tt.err, ErrInvalid) {
				t.Fatalf("err %v does not wrap ErrInvalid", tt.err)
			}
		})
	}
}
