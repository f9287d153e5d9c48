package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"openbot/core"
)

// Message index defaults (seed §9: the semantic index of every message).
const (
	// msgIndexBatch is how many messages one indexing step embeds and stores.
	msgIndexBatch = 64
	// msgIndexChars caps the text of one message sent to the embeddings endpoint.
	msgIndexChars = 8000
	// msgIndexCursor is the store cursor holding the last message ID indexed.
	msgIndexCursor = "memory.message_index"
	// recallMinCosine is the similarity below which an embedded message is no hit.
	recallMinCosine = 0.2
)

// MessageIndexOptions configures a MessageIndex. Store and Embedder are required.
type MessageIndexOptions struct {
	Store    core.Store
	Embedder *Embedder
	// Wake returns a channel closed at the store's next commit (the console's
	// commit notifier); Run indexes again when it closes. Take it before reading.
	// nil: Run indexes only at its start and on Notify.
	Wake   func() <-chan struct{}
	Logger *slog.Logger // nil discards
}

// MessageIndex is the semantic index of every message (seed §9): Run embeds
// new messages in the background, in batches of msgIndexBatch through the
// embeddings client, and stores one core.MessageVector per message, so ingest
// never waits for an embedding. recall_messages ranks a thread's embedded
// messages by cosine similarity to the query and the others lexically. A
// message whose embedding fails is retried at the next wake; the cursor only
// advances with the vectors it covers, in one transaction. Run owns the only
// goroutine. Safe for concurrent use.
type MessageIndex struct {
	opts MessageIndexOptions
	log  *slog.Logger
	wake chan struct{}
	emb  atomic.Pointer[Embedder] // opts.Embedder until Memories.SetEmbedder
}

// NewMessageIndex validates opts. It does no I/O.
func NewMessageIndex(opts MessageIndexOptions) (*MessageIndex, error) {
	if opts.Store == nil || opts.Embedder == nil {
		return nil, errors.New("agents: MessageIndexOptions needs Store and Embedder")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ix := &MessageIndex{opts: opts, log: opts.Logger, wake: make(chan struct{}, 1)}
	ix.emb.Store(opts.Embedder)
	return ix, nil
}

// Notify asks Run to index new messages; it never blocks.
func (ix *MessageIndex) Notify() {
	select {
	case ix.wake <- struct{}{}:
	default:
	}
}

// Run indexes new messages until ctx is done and returns nil. Shutdown is
// bounded by one embeddings request (the provider's request timeout), which
// honours ctx; what is not indexed yet is indexed after the next start.
func (ix *MessageIndex) Run(ctx context.Context) error {
	for {
		var commit <-chan struct{}
		if ix.opts.Wake != nil {
			commit = ix.opts.Wake()
		}
		for {
			n, err := ix.IndexPending(ctx)
			if err != nil {
				if ctx.Err() == nil {
					ix.log.Warn("message index: embedding stopped; retried at the next message", "err", err)
				}
				break
			}
			if n < msgIndexBatch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ix.wake:
		case <-commit:
		}
	}
}

// IndexPending embeds and stores the next batch of messages after the index's
// cursor and returns how many messages it covered (0: caught up). Messages
// without text are skipped. Errors: the store's, or the embeddings endpoint's.
func (ix *MessageIndex) IndexPending(ctx context.Context) (int, error) {
	var after core.MessageID
	var msgs []core.Message
	err := ix.opts.Store.View(ctx, func(tx core.ReadTx) error {
		after = 0 // fn may run again (core.Store.View)
		c, err := tx.Cursor(msgIndexCursor)
		if err != nil {
			return err
		}
		if c != "" {
			n, err := strconv.ParseUint(c, 10, 64)
			if err != nil {
				return fmt.Errorf("cursor %s: %w", msgIndexCursor, err)
			}
			after = core.MessageID(n)
		}
		msgs, err = tx.MessagesSince(after, msgIndexBatch)
		return err
	})
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	var texts []string
	var idx []int
	for i, m := range msgs {
		if strings.TrimSpace(m.Text) == "" {
			continue
		}
		texts = append(texts, cutString(m.Text, msgIndexChars))
		idx = append(idx, i)
	}
	emb := ix.emb.Load()
	var vecs [][]float32
	if len(texts) > 0 {
		if vecs, err = emb.Embed(ctx, texts); err != nil {
			return 0, err
		}
	}
	name := emb.Name()
	last := msgs[len(msgs)-1].ID
	err = ix.opts.Store.Update(ctx, func(tx core.Tx) error {
		for j, i := range idx {
			if len(vecs[j]) == 0 {
				continue
			}
			v := core.MessageVector{Thread: msgs[i].Thread, Message: msgs[i].ID, Model: name, Vector: vecs[j]}
			if err := tx.PutMessageVector(v); err != nil {
				return err
			}
		}
		return tx.SetCursor(msgIndexCursor, strconv.FormatUint(uint64(last), 10))
	})
	if err != nil {
		return 0, err
	}
	return len(msgs), nil
}

// rankSemantic ranks all (a thread's messages) for query (its embedding
// recorded in the ledger for bot): the messages with a
// vector of the current model by cosine similarity (at least recallMinCosine),
// and the messages not embedded yet lexically (rank, fallback), merged by
// alternating the two lists, each best first.
func (ix *MessageIndex) rankSemantic(ctx context.Context, thread core.ThreadID, bot string, all []core.Message, query string, words []string) ([]core.Message, error) {
	var vecs []core.MessageVector
	err := ix.opts.Store.View(ctx, func(tx core.ReadTx) error {
		var err error
		vecs, err = tx.MessageVectors(thread)
		return err
	})
	if err != nil {
		return nil, err
	}
	emb := ix.emb.Load()
	name := emb.Name()
	byID := map[core.MessageID][]float32{}
	for _, v := range vecs {
		if v.Model == name {
			byID[v.Message] = v.Vector
		}
	}
	if len(byID) == 0 {
		return rank(all, words), nil
	}
	q, err := emb.EmbedFor(ctx, bot, []string{cutString(query, msgIndexChars)})
	if err != nil {
		return nil, err
	}
	type scored struct {
		m     core.Message
		score float64
	}
	var sem []scored
	var rest []core.Message
	for _, m := range all {
		v, ok := byID[m.ID]
		if !ok {
			rest = append(rest, m)
			continue
		}
		if s := cosine(q[0], v); s >= recallMinCosine {
			sem = append(sem, scored{m, s})
		}
	}
	sort.SliceStable(sem, func(i, j int) bool {
		if sem[i].score != sem[j].score {
			return sem[i].score > sem[j].score
		}
		return sem[i].m.ID > sem[j].m.ID
	})
	lex := rank(rest, words)
	out := make([]core.Message, 0, len(sem)+len(lex))
	for i := 0; i < max(len(sem), len(lex)); i++ {
		if i < len(sem) {
			out = append(out, sem[i].m)
		}
		if i < len(lex) {
			out = append(out, lex[i])
		}
	}
	return out, nil
}
