package core

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// MemoryID identifies one memory; assigned by Tx.PutMemory from 1, strictly
// increasing.
type MemoryID uint64

// Where a memory's current text came from (Memory.Source).
const (
	// MemorySourceTool: the bot wrote it with manage_memory during a run.
	MemorySourceTool = "tool"
	// MemorySourceReflection: reflection after a run wrote it (seed §9).
	MemorySourceReflection = "reflection"
	// MemorySourceOperator: a person wrote it through the CLI or the admin API.
	MemorySourceOperator = "operator"
)

// MemoryScopeRule is the rule every memory write is given, word for word in
// the manage_memory tool and in reflection's instruction (seed §9, G6 items 1
// and 3; seed invariant 10): memory is the bot's professional knowledge, never
// one thread's facts.
const MemoryScopeRule = "Memory is for durable, bot-level knowledge about how to do your job, " +
	"useful in every future thread: preferences of the people you work with, conventions of the team, " +
	"lessons learned, how tools and systems behave. Never store task state, identifiers (PR, issue or " +
	"message numbers), file names, or decisions that are true in one thread only: the thread keeps those."

// Memory is one durable note of a bot (seed §9): bot-scoped and global across
// threads. Source and Run say what wrote the current text (the audit trail of
// every change is in the activity log, events "memory.*").
type Memory struct {
	ID      MemoryID  `json:"id"`
	Bot     string    `json:"bot"` // handle
	Text    string    `json:"text"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Source  string    `json:"source"`        // MemorySource*
	Run     RunID     `json:"run,omitempty"` // the run behind Source; 0 for operator edits
	// Embedding is the text's vector under EmbeddingModel ("profile/model"),
	// absent when no embeddings are configured or not yet computed. A
	// different configured model re-embeds it lazily.
	Embedding      []float32 `json:"embedding,omitempty"`
	EmbeddingModel string    `json:"embedding_model,omitempty"`
}

// PendingReflection is one completed run of a memory-enabled bot waiting to be
// reflected on (seed §9, G7: persisted, so a crash or restart loses none). The
// batch of a (Bot, Thread) is every pending row with that key; it is reflected
// once the newest row is older than the reflection delay, and its rows are
// deleted in the same transaction that applies the result.
type PendingReflection struct {
	Seq    uint64    `json:"seq"` // assigned by Tx.PutPendingReflection from 1
	Bot    string    `json:"bot"` // handle
	Thread ThreadID  `json:"thread"`
	Run    RunID     `json:"run"`
	At     time.Time `json:"at"` // when the run completed
	// Transcript is the run's last step checkpoint (the agent's format) and
	// Reply the text it posted.
	Transcript json.RawMessage `json:"transcript,omitempty"`
	Reply      string          `json:"reply,omitempty"`
}

// Reflections is the hook of the bot memory's reflection (seed §9). With
// Options.Reflections set, the engine stores a PendingReflection in the same
// transaction that completes a run of a bot with Memory on, then calls Notify.
type Reflections interface {
	// Notify says a pending reflection was stored. It must not block.
	Notify()
}

// queueReflectionTx stores the pending reflection of a run that just completed,
// in the transaction that completes it, when its bot has memory on and
// reflection is wired; it reports whether it stored one. transcript is the run's
// last checkpoint (runEnv.transcript, read before the run clears it, seed G5).
func (rn *runner) queueReflectionTx(tx Tx, job *Job, r Run, transcript json.RawMessage, reply string) (bool, error) {
	if rn.reflections == nil || !job.Bot.Memory {
		return false, nil
	}
	_, err := tx.PutPendingReflection(PendingReflection{Bot: job.Bot.Handle, Thread: r.Thread, Run: r.ID,
		At: rn.e.clock.Now(), Transcript: transcript, Reply: reply})
	return err == nil, err
}

// MaxMemoryChars caps one memory's text, in characters (runes): a memory is
// one short rule. Longer writes are refused, whoever makes them.
const MaxMemoryChars = 1000

// MemoryAudit is the activity line of one change to a memory (seed §9): Event
// "memory.created", "memory.updated" or "memory.deleted", the bot as actor, the
// run behind it (m.Run; 0 for people), and by saying who changed it
// ("reflection in run 9", "operator admin:console").
func MemoryAudit(event string, m Memory, thread ThreadID, by string, at time.Time) Activity {
	verb := event
	if i := strings.LastIndexByte(event, '.'); i >= 0 {
		verb = event[i+1:]
	}
	text := m.Text
	if r := []rune(text); len(r) > 200 {
		text = string(r[:200]) + "..."
	}
	return Activity{Event: event, Level: "info", Summary: fmt.Sprintf("@%s memory #%d %s by %s: %s", m.Bot, m.ID, verb, by, text),
		Thread: thread, Actor: BotActorID(m.Bot), Run: m.Run, At: at}
}

// MessageVector is the embedding of one message in the semantic index of a
// thread's messages (seed §9) that recall_messages ranks by cosine similarity.
// Model is the embedder's "profile/model": vectors of another model are
// ignored and re-embedded.
type MessageVector struct {
	Thread  ThreadID  `json:"thread"`
	Message MessageID `json:"message"`
	Model   string    `json:"model"`
	Vector  []float32 `json:"vector"`
}
