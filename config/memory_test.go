package config

import (
	"strings"
	"testing"
	"time"
)

func TestMemoryValidation(t *testing.T) {
	es := parseErrs(t, minimal+`
memory:
  reflection_delay: -1s
  flush_timeout: -2s
embeddings:
  llm: nowhere
`)
	got := es.Error()
	for _, want := range []string{"memory.reflection_delay", "memory.flush_timeout", "embeddings.model"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
	es = parseErrs(t, minimal+`
embeddings:
  llm: nowhere
  model: e
`)
	if !strings.Contains(es.Error(), `embeddings.llm: "nowhere" is not a profile`) {
		t.Errorf("errors = %v", es)
	}
}

func TestMemoryConfig(t *testing.T) {
	cfg := parseOK(t, minimal+`
memory: {reflection_delay: 5s}
embeddings: {model: nomic-embed-text}
`, nil)
	if cfg.Memory.ReflectionDelay != 5*time.Second || !cfg.Embeddings.On() || cfg.EmbeddingsProfile() != "default" {
		t.Errorf("memory = %+v, embeddings = %+v (profile %q)", cfg.Memory, cfg.Embeddings, cfg.EmbeddingsProfile())
	}
	// The example turns memory on for a bot and leaves embeddings off.
	ex := parseOK(t, readExample(t), map[string]string{"OPENAI_API_KEY": "sk-x"})
	on := false
	for _, b := range ex.Bots {
		on = on || b.Memory
	}
	if !on || ex.Embeddings.On() {
		t.Errorf("example: a bot with memory = %v, embeddings on = %v", on, ex.Embeddings.On())
	}
}
