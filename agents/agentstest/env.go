// Package agentstest holds test helpers shared by the agents packages' tests:
// an in-memory core.RunEnv for one thread. It is an ordinary package imported
// only by tests; it imports core and nothing of agents, so the agents package's
// own (internal) tests can use it without a cycle.
package agentstest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"openbot/core"
)

// Event is one run event recorded by Env.RecordEvent: its type and its payload
// as decoded JSON.
type Event struct {
	Type    string
	Payload map[string]any
}

// Env is an in-memory core.RunEnv for one thread (thread 1), the run's window
// onto its thread (DESIGN.md §6). It keeps everything in memory and never
// fails except on an invalid checkpoint. Fields may be read by tests while
// holding Mu; a zero Env is ready to use.
type Env struct {
	Mu          sync.Mutex
	Msgs        []core.Message // ascending IDs
	Events      []Event
	Checkpoints []json.RawMessage
	Todos       []core.TodoItem
	Posted      []string // texts given to Post, in order
}

var _ core.RunEnv = (*Env)(nil)

// Add appends a message to the thread with the next ID and returns it.
func (e *Env) Add(sender core.ActorID, name, text string, mentions ...string) core.Message {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	m := core.Message{ID: core.MessageID(len(e.Msgs) + 1), Thread: 1, Sender: sender, SenderName: name, Text: text, Mentions: mentions}
	e.Msgs = append(e.Msgs, m)
	return m
}

// Messages returns up to limit messages after the given ID, oldest first.
func (e *Env) Messages(ctx context.Context, after core.MessageID, limit int) ([]core.Message, error) {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	var out []core.Message
	for _, m := range e.Msgs {
		if m.ID > after && len(out) < limit {
			out = append(out, m)
		}
	}
	return out, ctx.Err()
}

// MessagesBefore returns up to limit messages before the given ID (0: the
// newest), newest first.
func (e *Env) MessagesBefore(ctx context.Context, before core.MessageID, limit int) ([]core.Message, error) {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	var out []core.Message
	for _, m := range slices.Backward(e.Msgs) {
		if (before == 0 || m.ID < before) && len(out) < limit {
			out = append(out, m)
		}
	}
	return out, ctx.Err()
}

// Count returns the number of messages in the thread.
func (e *Env) Count(context.Context) (int, error) {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	return len(e.Msgs), nil
}

// RecordEvent records a run event; payload is round-tripped through JSON.
func (e *Env) RecordEvent(_ context.Context, typ string, payload any) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	var p map[string]any
	_ = json.Unmarshal(raw, &p)
	e.Mu.Lock()
	defer e.Mu.Unlock()
	e.Events = append(e.Events, Event{typ, p})
	return nil
}

// Checkpoint records a transcript; it fails on invalid JSON.
func (e *Env) Checkpoint(_ context.Context, transcript json.RawMessage) error {
	if !json.Valid(transcript) {
		return errors.New("invalid checkpoint JSON")
	}
	e.Mu.Lock()
	defer e.Mu.Unlock()
	e.Checkpoints = append(e.Checkpoints, transcript)
	return nil
}

// Post records text and returns message ID 1000 + the number of posts.
func (e *Env) Post(_ context.Context, text string) (core.MessageID, error) {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	e.Posted = append(e.Posted, text)
	return core.MessageID(1000 + len(e.Posted)), nil
}

// Todo returns a copy of the bot's todo list.
func (e *Env) Todo(context.Context) ([]core.TodoItem, error) {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	return slices.Clone(e.Todos), nil
}

// SetTodo replaces the bot's todo list with a copy of items.
func (e *Env) SetTodo(_ context.Context, items []core.TodoItem) error {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	e.Todos = slices.Clone(items)
	return nil
}

// EventTypes returns the types of the recorded events, in order.
func (e *Env) EventTypes() []string {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	out := make([]string, len(e.Events))
	for i, ev := range e.Events {
		out[i] = ev.Type
	}
	return out
}

// Event returns the payload of the first recorded event of typ, or nil.
func (e *Env) Event(typ string) map[string]any {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	for _, ev := range e.Events {
		if ev.Type == typ {
			return ev.Payload
		}
	}
	return nil
}
