package main

import (
	"fmt"
	"log/slog"

	"openbot/agents"
	"openbot/config"
	"openbot/core"
)

// newMemory builds the bots' memory (seed §9) on the store: ranked by the
// configured embeddings endpoint, else lexically. It serves every bot with
// memory on, including those a reload turns on. The start log says which ranker
// is in use. With embeddings the message index (seed §9) wakes on wake's
// commits.
func newMemory(cfg *config.Config, st core.Store, log *slog.Logger, wake func() <-chan struct{}) (*agents.Memories, error) {
	opts := agents.MemoryOptions{Store: st, Logger: log, IndexWake: wake}
	if cfg.Embeddings.On() {
		base, err := agents.New(agents.Options{Providers: providers(cfg), Logger: log})
		if err != nil {
			return nil, err
		}
		if opts.Embedder, err = base.Embedder(cfg.EmbeddingsProfile(), cfg.Embeddings.Model); err != nil {
			return nil, fmt.Errorf("embeddings: %w", err)
		}
	}
	mem, err := agents.NewMemories(opts)
	if err != nil {
		return nil, err
	}
	var on []string
	for _, b := range cfg.Bots {
		if b.Memory {
			on = append(on, b.Handle)
		}
	}
	log.Info("memory", "bots", on, "ranking", mem.Ranker())
	return mem, nil
}

// newReflector builds the reflector of the bots' memory (seed §9, G7), pricing
// its calls with the cost section's prices.
func newReflector(cfg *config.Config, st core.Store, agent *agents.Agent, mem *agents.Memories, log *slog.Logger) (*agents.Reflector, error) {
	return agents.NewReflector(agents.ReflectorOptions{Store: st, Agent: agent, Memories: mem,
		Delay: cfg.Memory.ReflectionDelay, FlushTimeout: cfg.Memory.FlushTimeout,
		Prices: coreCost(cfg).Prices, Logger: log})
}
