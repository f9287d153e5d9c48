package config

import "time"

// Memory configures the bots' long-term memory (seed §9), for the bots with
// `memory: true`.
type Memory struct {
	// ReflectionDelay is the debounce of reflection: the runs of one (bot,
	// thread) are reflected together once the newest completed this long ago.
	// A Go duration; 0 or absent for the default (30s).
	ReflectionDelay time.Duration `yaml:"reflection_delay"`
	// FlushTimeout bounds reflecting the pending batches at shutdown; what is
	// left is reflected after the next start. 0 or absent for the default (10s).
	FlushTimeout time.Duration `yaml:"flush_timeout"`
}

// Embeddings names an OpenAI-compatible POST /v1/embeddings endpoint that
// ranks memories and recall_messages by meaning (seed §9). Absent: both rank
// lexically (BM25 / tf-idf).
type Embeddings struct {
	// LLM names the profile in the llm section whose base_url, api_key and
	// headers are used; default: the only profile, else "default".
	LLM string `yaml:"llm"`
	// Model is the embedding model ("text-embedding-3-small",
	// "nomic-embed-text"). Setting it turns embeddings on.
	Model string `yaml:"model"`
}

// On reports whether embeddings are configured.
func (e Embeddings) On() bool { return e.Model != "" }

// EmbeddingsProfile is the llm profile embeddings use: LLM, else the only profile, else
// "default".
func (c *Config) EmbeddingsProfile() string {
	if c.Embeddings.LLM != "" {
		return c.Embeddings.LLM
	}
	if len(c.LLM) == 1 {
		for name := range c.LLM {
			return name
		}
	}
	return "default"
}

// validateMemory: memory durations are not negative; embeddings.llm, when
// set, names a profile and needs embeddings.model; the profile embeddings use
// exists and is OpenAI-compatible.
func (c *Config) validateMemory(p *problems) {
	if c.Memory.ReflectionDelay < 0 {
		p.add("memory.reflection_delay", "must not be negative, got %s", c.Memory.ReflectionDelay)
	}
	if c.Memory.FlushTimeout < 0 {
		p.add("memory.flush_timeout", "must not be negative, got %s", c.Memory.FlushTimeout)
	}
	e := c.Embeddings
	if e.LLM != "" && e.Model == "" {
		p.add("embeddings.model", "must be set when embeddings.llm is")
	}
	if e.On() {
		if prof, ok := c.LLM[c.EmbeddingsProfile()]; !ok {
			p.add("embeddings.llm", "%q is not a profile in llm", c.EmbeddingsProfile())
		} else if !prof.OpenAICompatible() {
			p.add("embeddings.llm", "%q is a provider %s profile, which has no embeddings API; name an OpenAI-compatible profile", c.EmbeddingsProfile(), prof.Provider)
		}
	}
}
