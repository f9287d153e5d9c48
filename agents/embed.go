package agents

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// ErrNoEmbeddings is returned by Agent.Embedder for a profile that is not
// configured or a missing model.
var ErrNoEmbeddings = errors.New("embeddings not configured")

// embedBatch caps the texts sent in one embeddings request.
const embedBatch = 64

// Embedder computes embeddings on any OpenAI-compatible POST /v1/embeddings
// endpoint (OpenAI, Ollama, vLLM, llama.cpp), through a provider profile's
// client, so its base URL, key, headers, timeouts and retries apply. Safe for
// concurrent use.
type Embedder struct {
	pc     *providerClient
	model  string
	ledger *embedLedger
}

// embedLedger is where an Embedder records its calls (WithLedger).
type embedLedger struct {
	store  core.Store
	prices core.Prices
	clock  core.Clock
	log    *slog.Logger
}

// WithLedger returns a copy of e that records each embeddings request as one
// usage-ledger entry (cost control: every model call is in the ledger), with
// the response's input tokens, priced by prices[model] (a model without a
// price costs 0). The entry is attributed to the bot the embedding is for,
// else to no bot (the global scope only: the message index). Its key hashes
// the model and the texts, so a retried request is counted once. A failed
// record is logged, not returned. clock and log may be nil; a nil st returns e.
func (e *Embedder) WithLedger(st core.Store, prices core.Prices, clock core.Clock, log *slog.Logger) *Embedder {
	if st == nil {
		return e
	}
	if clock == nil {
		clock = systemClock{}
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := *e
	c.ledger = &embedLedger{store: st, prices: prices, clock: clock, log: log}
	return &c
}

// Embedder returns an Embedder on the provider profile named profile with model.
// It does no I/O. Errors: ErrNoEmbeddings.
func (a *Agent) Embedder(profile, model string) (*Embedder, error) {
	pc, ok := a.clients[profile]
	if !ok {
		return nil, fmt.Errorf("%w: llm profile %q is not configured", ErrNoEmbeddings, profile)
	}
	if model == "" {
		return nil, fmt.Errorf("%w: no model", ErrNoEmbeddings)
	}
	if pc.client == nil {
		return nil, fmt.Errorf("%w: llm profile %q speaks the %s API, which has no embeddings endpoint; name an OpenAI-compatible profile", ErrNoEmbeddings, profile, pc.prov.API)
	}
	return &Embedder{pc: pc, model: model}, nil
}

// Name is "profile/model", stored on each memory's embedding so a model
// change re-embeds (core.Memory.EmbeddingModel).
func (e *Embedder) Name() string { return e.pc.name + "/" + e.model }

// Embed returns one vector per text, in order. It honours ctx; one request is
// bounded by the profile's request timeout. An error names no secret.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return e.EmbedFor(ctx, "", texts)
}

// EmbedFor is Embed with each request's ledger entry attributed to bot (a
// handle; "" for none), when the Embedder has a ledger (WithLedger).
func (e *Embedder) EmbedFor(ctx context.Context, bot string, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += embedBatch {
		part := texts[start:min(len(texts), start+embedBatch)]
		cctx, cancel := context.WithTimeout(ctx, e.pc.prov.RequestTimeout)
		resp, err := e.pc.client.CreateEmbeddings(cctx, openai.EmbeddingRequestStrings{Input: part, Model: openai.EmbeddingModel(e.model)})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("embeddings (%s): %s", e.Name(), core.Redact(err.Error()))
		}
		if len(resp.Data) != len(part) {
			return nil, fmt.Errorf("embeddings (%s): %d vectors for %d texts", e.Name(), len(resp.Data), len(part))
		}
		e.record(ctx, bot, part, resp.Usage)
		vecs := make([][]float32, len(part))
		for i, d := range resp.Data {
			idx := d.Index
			if idx < 0 || idx >= len(part) || vecs[idx] != nil {
				idx = i
			}
			vecs[idx] = d.Embedding
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// record puts one embeddings request in the ledger, keyed by the bot, the
// model and a hash of the texts ("embed:<bot or index>:<sha256 prefix>").
func (e *Embedder) record(ctx context.Context, bot string, texts []string, u openai.Usage) {
	l := e.ledger
	if l == nil {
		return
	}
	h := sha256.New()
	h.Write([]byte(e.Name()))
	for _, t := range texts {
		fmt.Fprintf(h, "\x00%d:%s", len(t), t)
	}
	scope := cmp.Or(bot, "index")
	in := int64(u.PromptTokens)
	if in == 0 {
		in = int64(u.TotalTokens)
	}
	entry := core.UsageEntry{Key: "embed:" + scope + ":" + hex.EncodeToString(h.Sum(nil)[:16]), At: l.clock.Now(),
		Bot: bot, Profile: e.pc.name, Model: e.model, InputTokens: in,
		CostMicros: l.price(e.model).Cost(in, 0, 0, 0)}
	err := l.store.Update(ctx, func(tx core.Tx) error {
		_, _, err := tx.PutUsage(entry)
		return err
	})
	if err != nil {
		l.log.Warn("record embeddings call in the usage ledger", "model", e.Name(), "bot", bot, "err", err)
	}
}

// cosine is the cosine similarity of a and b; 0 when either is zero or their
// lengths differ.
func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// price is model's price (Prices.For); zero when unpriced.
func (l *embedLedger) price(model string) core.Price {
	p, _ := l.prices.For(model)
	return p
}
