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
		if opts.Embedder, err = newEmbedder(cfg, base, st, log); err != nil {
			return nil, err
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

// newEmbedder is the embeddings client of cfg on agent's llm profiles, each
// call recorded in the usage ledger of st priced by the cost section (cost
// control: every model call is in the ledger).
func newEmbedder(cfg *config.Config, agent *agents.Agent, st core.Store, log *slog.Logger) (*agents.Embedder, error) {
	e, err := agent.Embedder(cfg.EmbeddingsProfile(), cfg.Embeddings.Model)
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	return e.WithLedger(st, coreCost(cfg).Prices, nil, log), nil
}

// newReflector builds the reflector of the bots' memory (seed §9, G7), pricing
// its calls with the cost section's prices. It reflects with the swap's current
// agent, so a reload's llm profiles apply to the next reflection.
func newReflector(cfg *config.Config, st core.Store, swap *swapAgent, mem *agents.Memories, log *slog.Logger) (*agents.Reflector, error) {
	return agents.NewReflector(agents.ReflectorOptions{Store: st, Agent: swap.cur.Load(), Current: swap.cur.Load, Memories: mem,
		Delay: cfg.Memory.ReflectionDelay, FlushTimeout: cfg.Memory.FlushTimeout,
		Prices: coreCost(cfg).Prices, Logger: log})
}
