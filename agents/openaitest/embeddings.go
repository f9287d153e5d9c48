package openaitest

import (
	"encoding/json"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strings"
	"unicode"

	openai "github.com/sashabaranov/go-openai"
)

// EmbeddingDims is the length of the fake's default vectors.
const EmbeddingDims = 64

// Embed is the fake's default embedding: a deterministic bag of words, each
// lowercase word (letters and digits) hashed into one of EmbeddingDims
// dimensions, the vector normalised to length 1. Texts sharing words are
// similar by cosine, texts sharing none are orthogonal, so tests can reason
// about ranking exactly; an empty text is the zero vector.
func Embed(text string) []float32 {
	v := make([]float32, EmbeddingDims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(w))
		v[h.Sum32()%EmbeddingDims]++
	}
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n > 0 {
		for i := range v {
			v[i] = float32(float64(v[i]) / math.Sqrt(n))
		}
	}
	return v
}

// EmbeddingRequests returns every POST /v1/embeddings request received so far,
// decoded, in arrival order.
func (s *Server) EmbeddingRequests() []openai.EmbeddingRequestStrings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]openai.EmbeddingRequestStrings(nil), s.embedReqs...)
}

// SetEmbedding makes POST /v1/embeddings answer with fn's vectors (nil: Embed
// again), so a test can model meaning that shares no words.
func (s *Server) SetEmbedding(fn func(string) []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embedFn = fn
}

// serveEmbeddings speaks OpenAI's POST /v1/embeddings: "input" a string or a
// list of strings, answered with one Embed vector per input in order.
func (s *Server) serveEmbeddings(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, Error(http.StatusBadRequest, "cannot read body"))
		return
	}
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		writeError(w, Error(http.StatusBadRequest, "invalid JSON body: "+err.Error()))
		return
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			writeError(w, Error(http.StatusBadRequest, "input must be a string or a list of strings"))
			return
		}
		inputs = []string{one}
	}
	s.mu.Lock()
	s.embedReqs = append(s.embedReqs, openai.EmbeddingRequestStrings{Input: inputs, Model: openai.EmbeddingModel(req.Model)})
	embed := s.embedFn
	s.mu.Unlock()
	if embed == nil {
		embed = Embed
	}
	data := make([]map[string]any, len(inputs))
	tokens := 0
	for i, in := range inputs {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": embed(in)}
		tokens += max(1, len(in)/4)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]any{"prompt_tokens": tokens, "total_tokens": tokens}})
}
