package main

import (
	"context"
	"io"
	"path/filepath"
	"strconv"

	"openbot/agents"
	"openbot/config"
	"openbot/core"
)

// transcriber returns the voice-note transcription hook of the files section,
// or nil when it is off.
func transcriber(cfg *config.Config) (func(ctx context.Context, name string, audio io.Reader) (string, error), error) {
	chain := cfg.TranscriptionChain()
	if chain == nil {
		return nil, nil
	}
	provs := providers(cfg)
	out := make([]agents.TranscribeProfile, 0, len(chain))
	for _, name := range chain {
		out = append(out, agents.TranscribeProfile{Name: name, Provider: provs[name]})
	}
	return agents.NewTranscriber(out, cfg.Files.Transcription.Model, nil, cooldowns)
}

// fileLimits maps the files section onto the engine: inbound files go to the
// thread's workspace folder (<workspace>/thread-<id>, as the file tools see
// it), with the configured caps.
func fileLimits(cfg *config.Config) core.FileLimits {
	root := cfg.Workspace
	return core.FileLimits{
		Dir: func(id core.ThreadID) string {
			return filepath.Join(root, "thread-"+strconv.FormatUint(uint64(id), 10))
		},
		MaxFileBytes:    cfg.Files.MaxFileBytes,
		MaxMessageBytes: cfg.Files.MaxMessageBytes,
	}
}
