package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"openbot/core"
)

// BenchmarkPutRunCheckpoint is the run work of the single writer per agent step
// (DESIGN.md §8): one Update that reads the run, updates it and appends an event,
// with a 32 KiB checkpoint and without fsync, so what it measures is the CPU of
// the write transaction. "same" keeps the checkpoint (a usage or status update);
// "changed" stores a different checkpoint of the same size each time (a step).
func BenchmarkPutRunCheckpoint(b *testing.B) {
	for _, changed := range []bool{false, true} {
		name := "same"
		if changed {
			name = "changed"
		}
		b.Run(name, func(b *testing.B) { benchPutRunCheckpoint(b, changed) })
	}
}

func benchPutRunCheckpoint(b *testing.B, changed bool) {
	s, err := Open(filepath.Join(b.TempDir(), "runs.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	cps := [2]json.RawMessage{benchTranscript(32<<10, "a"), benchTranscript(32<<10, "b")}
	var id core.RunID
	err = s.Update(ctx, func(tx core.Tx) error {
		r, err := tx.PutRun(core.Run{Bot: "bot:eng", Thread: 1, Status: core.RunRunning, Checkpoint: cps[0]})
		id = r.ID
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		err := s.Update(ctx, func(tx core.Tx) error {
			r, err := tx.Run(id)
			if err != nil {
				return err
			}
			r.Usage.ModelCalls++
			if changed {
				r.Checkpoint = cps[i%2]
			}
			if _, err := tx.PutRun(r); err != nil {
				return err
			}
			_, err = tx.AppendRunEvent(core.RunEvent{Run: id, Type: "step"})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchTranscript is a JSON transcript of about size bytes, shaped like an
// agent's checkpoint (messages with escaped text), its text marked by tag.
func benchTranscript(size int, tag string) json.RawMessage {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var t struct {
		Messages []msg `json:"messages"`
	}
	line := strings.Repeat("the build failed: \"exit 1\" in step <lint>\n", 10)
	for n := 0; n < size; n += len(line) + 40 {
		t.Messages = append(t.Messages, msg{Role: "tool", Content: fmt.Sprintf("%s %d %s", tag, n, line)})
	}
	data, err := json.Marshal(t)
	if err != nil {
		panic(err)
	}
	return data
}
