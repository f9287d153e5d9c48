package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// NewTranscriber returns a function that turns an audio file (its name, whose
// extension tells the format, and its contents, which it reads to the end)
// into text with the OpenAI-compatible transcription endpoint of provider p
// (POST <base_url>/audio/transcriptions) and the given model ("whisper-1"),
// for core.FileLimits.Transcribe (files in both directions, voice notes).
// The call honours ctx; errors carry no key. It returns an error for an
// empty model or a malformed base URL.
func NewTranscriber(p Provider, model string, hc *http.Client) (func(ctx context.Context, name string, audio io.Reader) (string, error), error) {
	if strings.TrimSpace(model) == "" {
		return nil, errors.New("agents: transcription model is empty")
	}
	cfg := openai.DefaultConfig(p.APIKey)
	if p.BaseURL != "" {
		cfg.BaseURL = strings.TrimRight(p.BaseURL, "/")
	}
	if hc != nil {
		cfg.HTTPClient = hc
	}
	client := openai.NewClientWithConfig(cfg)
	return func(ctx context.Context, name string, audio io.Reader) (string, error) {
		res, err := client.CreateTranscription(ctx, openai.AudioRequest{Model: model, FilePath: name, Reader: audio})
		if err != nil {
			return "", fmt.Errorf("transcription: %s", core.Redact(err.Error()))
		}
		return res.Text, nil
	}, nil
}
