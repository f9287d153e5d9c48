package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"openbot/core"
)

// Memory limits (seed §9).
const (
	// searchMemoryMax caps search_memory's k.
	searchMemoryMax = 20
	// embedQueryChars caps the query text sent to the embeddings endpoint.
	embedQueryChars = 8000
)

// ErrMemory is returned (wrapped, with the reason) for a memory write that is
// refused: empty or too long text, an ID that is not one of the bot's memories.
var ErrMemory = errors.New("memory refused")

// MemoryOptions configures Memories. Store is required.
type MemoryOptions struct {
	Store core.Store
	// Embedder ranks by cosine similarity of embeddings; nil ranks lexically
	// (BM25 over the memory texts).
	Embedder *Embedder
	// IndexWake is MessageIndexOptions.Wake of the message index an Embedder
	// brings (MessageIndex).
	IndexWake func() <-chan struct{}
	Clock     core.Clock   // nil: the system clock
	Logger    *slog.Logger // nil discards
}

// Memories is the bots' long-term memory over the store (seed §9): per bot,
// global across threads. It ranks memories for the prompt (Recall, seed §6
// item 4) and for search_memory, writes them for manage_memory, reflection and
// operators, and records every change in the activity log ("memory.created",
// "memory.updated", "memory.deleted", with the run behind it). Safe for
// concurrent use.
type Memories struct {
	store core.Store
	emb   atomic.Pointer[Embedder] // nil: lexical; SetEmbedder swaps it
	clock core.Clock
	log   *slog.Logger
	index *MessageIndex
}

var _ MemoryRecaller = (*Memories)(nil)

// NewMemories returns the memory service. It does no I/O.
func NewMemories(opts MemoryOptions) (*Memories, error) {
	if opts.Store == nil {
		return nil, errors.New("agents: MemoryOptions.Store is required")
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := &Memories{store: opts.Store, clock: opts.Clock, log: opts.Logger}
	m.emb.Store(opts.Embedder)
	if opts.Embedder != nil {
		ix, err := NewMessageIndex(MessageIndexOptions{Store: opts.Store, Embedder: opts.Embedder, Wake: opts.IndexWake, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		m.index = ix
	}
	return m, nil
}

// SetEmbedder makes e the Embedder of the memories and of their message index
// from the next call on (a configuration reload: its llm profiles and ledger).
// It only swaps one Embedder for another: memories built without one, or a nil
// e, keep what they have (turning embeddings on or off takes a restart).
func (m *Memories) SetEmbedder(e *Embedder) {
	if e == nil || m.emb.Load() == nil {
		return
	}
	m.emb.Store(e)
	if m.index != nil {
		m.index.emb.Store(e)
	}
}

// MessageIndex is the semantic index of messages on the same Embedder (seed
// §9), nil without one: its owner runs MessageIndex.Run and hands it to
// Options.MessageIndex.
func (m *Memories) MessageIndex() *MessageIndex { return m.index }

// Ranker says how memories are ranked, for the start log: "embeddings
// (profile/model)" or "lexical (BM25)".
func (m *Memories) Ranker() string {
	if e := m.emb.Load(); e != nil {
		return "embeddings (" + e.Name() + ")"
	}
	return "lexical (BM25)"
}

// Recall implements MemoryRecaller: up to limit memories of the bot, best
// first for query, each as "(#id) text" so the bot can update or delete it.
func (m *Memories) Recall(ctx context.Context, bot core.BotProfile, query string, limit int) ([]string, error) {
	mems, err := m.Search(ctx, bot.Handle, query, limit)
	out := make([]string, len(mems))
	for i, mm := range mems {
		out[i] = fmt.Sprintf("(#%d) %s", mm.ID, mm.Text)
	}
	return out, err
}

// List returns every memory of the bot, oldest first.
func (m *Memories) List(ctx context.Context, bot string) ([]core.Memory, error) {
	var out []core.Memory
	err := m.store.View(ctx, func(tx core.ReadTx) error {
		var err error
		out, err = tx.Memories(bot)
		return err
	})
	return out, err
}

// Search returns up to limit memories of the bot (limit <= 0: all), best first
// for query: by cosine similarity of embeddings when an Embedder is set (a
// memory embedded under another model, or not yet, is embedded now and
// stored), else by BM25. Memories that match nothing follow, newest first, so
// a bot with few memories sees them all. An embeddings failure is logged and
// the lexical ranking used.
func (m *Memories) Search(ctx context.Context, bot, query string, limit int) ([]core.Memory, error) {
	mems, err := m.List(ctx, bot)
	if err != nil || len(mems) == 0 {
		return nil, err
	}
	var scores []float64
	if m.emb.Load() != nil && strings.TrimSpace(query) != "" {
		if scores, err = m.semantic(ctx, bot, mems, query); err != nil {
			m.log.Warn("rank memories by embeddings failed; ranking lexically", "bot", bot, "err", err)
		}
	}
	if scores == nil {
		scores = bm25(mems, query)
	}
	idx := make([]int, len(mems))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		sa, sb := scores[idx[a]], scores[idx[b]]
		if sa != sb {
			return sa > sb
		}
		return mems[idx[a]].ID > mems[idx[b]].ID
	})
	if limit <= 0 || limit > len(idx) {
		limit = len(idx)
	}
	out := make([]core.Memory, limit)
	for i := range out {
		out[i] = mems[idx[i]]
	}
	return out, nil
}

// semantic scores mems by cosine similarity to query, embedding (and storing)
// the memories that have no vector under the current model.
func (m *Memories) semantic(ctx context.Context, bot string, mems []core.Memory, query string) ([]float64, error) {
	emb := m.emb.Load()
	name := emb.Name()
	// Embedding models take a few thousand tokens; a longer query (a
	// reflection's transcript) is ranked by its newest part.
	if len(query) > embedQueryChars {
		query = query[len(query)-embedQueryChars:]
		for len(query) > 0 && !isRuneStart(query[0]) {
			query = query[1:]
		}
	}
	texts := []string{query}
	var stale []int
	for i, mm := range mems {
		if mm.EmbeddingModel != name || len(mm.Embedding) == 0 {
			stale = append(stale, i)
			texts = append(texts, mm.Text)
		}
	}
	vecs, err := emb.EmbedFor(ctx, bot, texts)
	if err != nil {
		return nil, err
	}
	for j, i := range stale {
		mems[i].Embedding, mems[i].EmbeddingModel = vecs[j+1], name
	}
	if len(stale) > 0 {
		m.storeEmbeddings(ctx, mems, stale)
	}
	scores := make([]float64, len(mems))
	for i, mm := range mems {
		scores[i] = cosine(vecs[0], mm.Embedding)
	}
	return scores, nil
}

// storeEmbeddings saves freshly computed vectors on memories whose text did not
// change meanwhile (lazy re-embedding); a failure is logged only.
func (m *Memories) storeEmbeddings(ctx context.Context, mems []core.Memory, idx []int) {
	err := m.store.Update(ctx, func(tx core.Tx) error {
		for _, i := range idx {
			cur, err := tx.Memory(mems[i].ID)
			if errors.Is(err, core.ErrNotFound) || (err == nil && cur.Text != mems[i].Text) {
				continue
			}
			if err != nil {
				return err
			}
			cur.Embedding, cur.EmbeddingModel = mems[i].Embedding, mems[i].EmbeddingModel
			if _, err := tx.PutMemory(cur); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		m.log.Warn("store memory embeddings", "err", err)
	}
}

// MemoryOp is one change to a bot's memories: Op "insert" (Text), "update" (ID,
// Text) or "delete" (ID). Reflection returns a list of them (seed G6 item 4);
// manage_memory, the CLI and the admin API make one.
type MemoryOp struct {
	Op   string        `json:"op"`
	ID   core.MemoryID `json:"id,omitempty"`
	Text string        `json:"text,omitempty"`
}

// MemoryChange says who makes a change: Source (core.MemorySource*), the Run
// behind it (0 for operators) and its Thread for the audit line (0: none).
type MemoryChange struct {
	Bot    string
	Source string
	Run    core.RunID
	Thread core.ThreadID
}

// Apply makes ops in one transaction and returns the memories as written (a
// deleted one as it was). Any refused op refuses them all with ErrMemory.
func (m *Memories) Apply(ctx context.Context, who MemoryChange, ops []MemoryOp) ([]core.Memory, error) {
	vecs := m.embedOps(ctx, who.Bot, ops)
	var out []core.Memory
	err := m.store.Update(ctx, func(tx core.Tx) error {
		var err error
		out, err = m.applyTx(tx, who, ops, vecs, nil)
		return err
	})
	return out, err
}

// embedOps embeds the texts of ops before their transaction (no network inside
// one); nil when there is no Embedder or it failed (the memories are then
// embedded lazily by the next search).
func (m *Memories) embedOps(ctx context.Context, bot string, ops []MemoryOp) map[string][]float32 {
	emb := m.emb.Load()
	if emb == nil {
		return nil
	}
	var texts []string
	for _, op := range ops {
		if t := strings.TrimSpace(op.Text); t != "" && op.Op != "delete" {
			texts = append(texts, t)
		}
	}
	if len(texts) == 0 {
		return nil
	}
	vecs, err := emb.EmbedFor(ctx, bot, texts)
	if err != nil {
		m.log.Warn("embed memories; they are embedded at the next search", "err", err)
		return nil
	}
	out := make(map[string][]float32, len(texts))
	for i, t := range texts {
		out[t] = vecs[i]
	}
	return out
}

// applyTx applies ops inside tx. With skipped set (lenient), an op that cannot
// apply (an ID that is not the bot's, empty text) is skipped and its error
// appended to *skipped, for the caller to log once tx committed, instead of
// failing the lot: what reflection wants, since the model may name a memory
// deleted meanwhile.
func (m *Memories) applyTx(tx core.Tx, who MemoryChange, ops []MemoryOp, vecs map[string][]float32, skipped *[]error) ([]core.Memory, error) {
	now := m.clock.Now()
	var out []core.Memory
	for _, op := range ops {
		mem, err := m.applyOne(tx, who, op, vecs, now)
		if err != nil && skipped != nil && errors.Is(err, ErrMemory) {
			*skipped = append(*skipped, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, mem)
	}
	return out, nil
}

func (m *Memories) applyOne(tx core.Tx, who MemoryChange, op MemoryOp, vecs map[string][]float32, now time.Time) (core.Memory, error) {
	text := strings.TrimSpace(op.Text)
	var mem core.Memory
	if op.Op == "update" || op.Op == "delete" {
		cur, err := tx.Memory(op.ID)
		if errors.Is(err, core.ErrNotFound) || (err == nil && cur.Bot != who.Bot) {
			return mem, fmt.Errorf("%w: @%s has no memory #%d", ErrMemory, who.Bot, op.ID)
		}
		if err != nil {
			return mem, err
		}
		mem = cur
	}
	switch op.Op {
	case "insert", "create", "update":
		if text == "" {
			return mem, fmt.Errorf("%w: empty text", ErrMemory)
		}
		if utf8.RuneCountInString(text) > core.MaxMemoryChars {
			return mem, fmt.Errorf("%w: text longer than %d characters; keep a memory to one short rule", ErrMemory, core.MaxMemoryChars)
		}
		if op.Op != "update" {
			mem = core.Memory{Bot: who.Bot, Created: now}
		}
		mem.Text, mem.Updated, mem.Source, mem.Run = text, now, who.Source, who.Run
		mem.Embedding, mem.EmbeddingModel = nil, ""
		if v, ok := vecs[text]; ok {
			mem.Embedding, mem.EmbeddingModel = v, m.emb.Load().Name()
		}
		stored, err := tx.PutMemory(mem)
		if err != nil {
			return mem, err
		}
		event := "memory.updated"
		if op.Op != "update" {
			event = "memory.created"
		}
		return stored, m.audit(tx, who, event, stored, now)
	case "delete":
		if err := tx.DeleteMemory(mem.ID); err != nil {
			return mem, err
		}
		return mem, m.audit(tx, who, "memory.deleted", mem, now)
	default:
		return mem, fmt.Errorf("%w: unknown op %q (insert, update or delete)", ErrMemory, op.Op)
	}
}

// audit appends the activity line of one memory change.
func (m *Memories) audit(tx core.Tx, who MemoryChange, event string, mem core.Memory, now time.Time) error {
	by := who.Source
	if who.Run != 0 {
		by += fmt.Sprintf(" in run %d", who.Run)
	}
	mem.Run = who.Run
	return tx.AppendActivity(core.MemoryAudit(event, mem, who.Thread, by, now))
}

// bm25 scores each memory's text for query with Okapi BM25 (k1 1.2, b 0.75),
// over the same words as recall_messages (terms).
func bm25(mems []core.Memory, query string) []float64 {
	const k1, b = 1.2, 0.75
	var q []string
	for _, t := range terms(query) {
		if len([]rune(t)) >= 2 && !slices.Contains(q, t) {
			q = append(q, t)
		}
	}
	scores := make([]float64, len(mems))
	if len(q) == 0 {
		return scores
	}
	tfs := make([]map[string]int, len(mems))
	lens := make([]int, len(mems))
	df := map[string]int{}
	total := 0
	for i, mm := range mems {
		words := terms(mm.Text)
		tf := map[string]int{}
		for _, w := range words {
			for _, t := range q {
				if w == t || (len(t) >= 4 && strings.HasPrefix(w, t)) {
					tf[t]++
				}
			}
		}
		for t := range tf {
			df[t]++
		}
		tfs[i], lens[i] = tf, len(words)
		total += len(words)
	}
	avg := float64(max(total, 1)) / float64(len(mems))
	n := float64(len(mems))
	for i := range mems {
		for t, f := range tfs[i] {
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			ff := float64(f)
			scores[i] += idf * ff * (k1 + 1) / (ff + k1*(1-b+b*float64(lens[i])/avg))
		}
	}
	return scores
}
