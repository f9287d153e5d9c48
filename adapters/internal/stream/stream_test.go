package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"openbot/core"
)

// chat is a fake platform: messages by id, and what was done to them.
type chat struct {
	msgs   map[string]string
	next   int
	calls  []string
	failAt string // a call ("post 1", "edit m1") that fails once
}

var errGone = errors.New("gone")

func (c *chat) ops() Ops {
	fail := func(call string) error {
		c.calls = append(c.calls, call)
		if call == c.failAt {
			c.failAt = ""
			return errors.New("429")
		}
		return nil
	}
	return Ops{
		Edit: func(_ context.Context, id, p string) error {
			if err := fail("edit " + id); err != nil {
				return err
			}
			if _, ok := c.msgs[id]; !ok {
				return errGone
			}
			c.msgs[id] = p
			return nil
		},
		Post: func(_ context.Context, i int, p string) (string, error) {
			if err := fail(fmt.Sprint("post ", i)); err != nil {
				return "", err
			}
			c.next++
			id := fmt.Sprint("m", c.next)
			c.msgs[id] = p
			return id, nil
		},
		Delete: func(_ context.Context, ids []string) error {
			for _, id := range ids {
				delete(c.msgs, id)
			}
			return fail("delete " + strings.Join(ids, ","))
		},
		Gone: func(err error) bool { return errors.Is(err, errGone) },
	}
}

func words(s string) []string { return strings.Fields(s) }

func TestUpdateEditsOnlyChangedParts(t *testing.T) {
	c := &chat{msgs: map[string]string{}}
	ids, err := Update(context.Background(), core.StreamDelivery{Text: "a b"}, words, c.ops())
	if err != nil || !slices.Equal(ids, []string{"m1", "m2"}) {
		t.Fatalf("first call = %v, %v", ids, err)
	}
	c.calls = nil
	ids, err = Update(context.Background(), core.StreamDelivery{Text: "a c", Shown: "a b", Posted: ids}, words, c.ops())
	if err != nil || !slices.Equal(ids, []string{"m1", "m2"}) || !slices.Equal(c.calls, []string{"edit m2"}) {
		t.Fatalf("second call = %v, %v, calls %q", ids, err, c.calls)
	}
	ids, err = Update(context.Background(), core.StreamDelivery{Text: "a", Shown: "a c", Posted: ids}, words, c.ops())
	if err != nil || !slices.Equal(ids, []string{"m1"}) || len(c.msgs) != 1 {
		t.Fatalf("shrinking = %v, %v, messages %v", ids, err, c.msgs)
	}
	ids, err = Update(context.Background(), core.StreamDelivery{Text: " ", Posted: ids}, words, c.ops())
	if err != nil || ids != nil || len(c.msgs) != 0 {
		t.Fatalf("empty text = %v, %v, messages %v", ids, err, c.msgs)
	}
}

func TestUpdateKeepsWhatWasPostedOnError(t *testing.T) {
	c := &chat{msgs: map[string]string{}, failAt: "post 1"}
	ids, err := Update(context.Background(), core.StreamDelivery{Text: "a b"}, words, c.ops())
	if err == nil || !slices.Equal(ids, []string{"m1"}) {
		t.Fatalf("got %v, %v; want [m1] and the error", ids, err)
	}
}

func TestFinishResumesAfterFailure(t *testing.T) {
	c := &chat{msgs: map[string]string{"m1": "a", "m2": "b", "m3": "c"}, next: 3, failAt: "post 3"}
	delete(c.msgs, "m2") // deleted by someone: posted anew
	f := Final{Parts: words("A B C D"), Streamed: []string{"m1", "m2", "m3"}}
	if err := f.Finish(context.Background(), c.ops(), slog.New(slog.DiscardHandler)); err == nil || f.Done != 3 {
		t.Fatalf("first attempt: err %v, done %d; want an error after 3 parts", err, f.Done)
	}
	c.calls = nil
	if err := f.Finish(context.Background(), c.ops(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.calls, []string{"post 3"}) || f.First != "m1" {
		t.Fatalf("retry calls %q, first %q; want only the missing part", c.calls, f.First)
	}
	if got := []string{c.msgs["m1"], c.msgs["m3"], c.msgs["m4"], c.msgs["m5"]}; !slices.Equal(got, words("A C B D")) {
		t.Fatalf("messages %v", c.msgs)
	}
}

func TestFinishDeletesSurplus(t *testing.T) {
	c := &chat{msgs: map[string]string{"m1": "a", "m2": "b"}, next: 2}
	f := Final{Parts: words("A"), Streamed: []string{"m1", "m2"}}
	if err := f.Finish(context.Background(), c.ops(), slog.New(slog.DiscardHandler)); err != nil || len(c.msgs) != 1 || c.msgs["m1"] != "A" {
		t.Fatalf("err %v, messages %v", err, c.msgs)
	}
}
