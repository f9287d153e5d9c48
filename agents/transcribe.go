package agents

import (
	"bytes"
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
// into text with the OpenAI-compatible transcription endpoint (POST
// <base_url>/audio/transcriptions) and the given model ("whisper-1"), for
// core.FileLimits.Transcribe (files in both directions, voice notes). chain is
// the profiles to ask in order: the next is asked when one answers 429, 5xx,
// 404, 401 or 403 or cannot be reached (the audio is read once and sent again).
// A profile's first key is used (Provider.Keys, else APIKey). The call honours
// ctx; errors carry no key. It returns an error for an empty model or chain.
func NewTranscriber(chain []Provider, model string, hc *http.Client) (func(ctx context.Context, name string, audio io.Reader) (string, error), error) {
	if strings.TrimSpace(model) == "" {
		return nil, errors.New("agents: transcription model is empty")
	}
	if len(chain) == 0 {
		return nil, errors.New("agents: no transcription profile")
	}
	clients := make([]*openai.Client, 0, len(chain))
	for _, p := range chain {
		key := p.APIKey
		if len(p.Keys) > 0 {
			key = p.Keys[0].Value
		}
		cfg := openai.DefaultConfig(key)
		if p.BaseURL != "" {
			cfg.BaseURL = strings.TrimRight(p.BaseURL, "/")
		}
		if hc != nil {
			cfg.HTTPClient = hc
		}
		clients = append(clients, openai.NewClientWithConfig(cfg))
	}
	return func(ctx context.Context, name string, audio io.Reader) (string, error) {
		raw, err := io.ReadAll(audio)
		if err != nil {
			return "", fmt.Errorf("transcription: read the audio: %w", err)
		}
		var errs []string
		for _, c := range clients {
			res, err := c.CreateTranscription(ctx, openai.AudioRequest{Model: model, FilePath: name, Reader: bytes.NewReader(raw)})
			if err == nil {
				return res.Text, nil
			}
			errs = append(errs, core.Redact(err.Error()))
			if ctx.Err() != nil || !transcribeFallback(err) {
				break
			}
		}
		return "", fmt.Errorf("transcription: %s", strings.Join(errs, "; then "))
	}, nil
}

// transcribeFallback reports whether a failed transcription may go to the
// next profile: a rate limit, a server error, a missing model or path, a
// refused key, or no answer at all.
func transcribeFallback(err error) bool {
	status := 0
	var (
		apiErr *openai.APIError
		reqErr *openai.RequestError
	)
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	default:
		return true
	}
	return status == http.StatusTooManyRequests || status >= 500 || status == http.StatusNotFound ||
		status == http.StatusUnauthorized || status == http.StatusForbidden
}
