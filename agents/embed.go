package agents

import (
	"context"
	"errors"
	"fmt"
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
	pc    *providerClient
	model string
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
	return &Embedder{pc: pc, model: model}, nil
}

// Name is "profile/model", stored on each memory's embedding so a model
// change re-embeds (core.Memory.EmbeddingModel).
func (e *Embedder) Name() string { return e.pc.name + "/" + e.model }

// Embed returns one vector per text, in order. It honours ctx; one request is
// bounded by the profile's request timeout. An error names no secret.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
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
