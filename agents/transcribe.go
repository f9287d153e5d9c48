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

// TranscribeProfile is one llm profile of a transcription chain: its name
// (for cooldowns and errors) and provider.
type TranscribeProfile struct {
	Name string
	Provider
}

// NewTranscriber returns a function that turns an audio file (its name, whose
// extension tells the format, and its contents, which it reads to the end)
// into text with the OpenAI-compatible transcription endpoint (POST
// <base_url>/audio/transcriptions) and the given model ("whisper-1"), for
// core.FileLimits.Transcribe (files in both directions, voice notes). chain is
// the profiles to ask in order: one that answers 429, 5xx, 404, 401 or 403 or
// cannot be reached cools down in cd (nil: a Cooldowns of its own) and the
// next is asked (the audio is read once and sent again); profiles cooling
// down are skipped while another is not. A profile's first key is used
// (Provider.Keys, else APIKey). The call honours ctx; errors carry no key. It
// returns an error for an empty model or chain.
func NewTranscriber(chain []TranscribeProfile, model string, hc *http.Client, cd *Cooldowns) (func(ctx context.Context, name string, audio io.Reader) (string, error), error) {
	if strings.TrimSpace(model) == "" {
		return nil, errors.New("agents: transcription model is empty")
	}
	if len(chain) == 0 {
		return nil, errors.New("agents: no transcription profile")
	}
	if cd == nil {
		cd = NewCooldowns(nil)
	}
	type profile struct {
		name, id string
		client   *openai.Client
	}
	profiles := make([]profile, 0, len(chain))
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
		profiles = append(profiles, profile{name: p.Name, id: "transcribe:" + p.Name + "|" + p.BaseURL, client: openai.NewClientWithConfig(cfg)})
	}
	return func(ctx context.Context, name string, audio io.Reader) (string, error) {
		raw, err := io.ReadAll(audio)
		if err != nil {
			return "", fmt.Errorf("transcription: read the audio: %w", err)
		}
		order := make([]profile, 0, len(profiles))
		var cooling []profile
		for _, p := range profiles {
			if d, _ := cd.left(p.id); d > 0 {
				cooling = append(cooling, p)
				continue
			}
			order = append(order, p)
		}
		order = append(order, cooling...) // asked only when the others failed
		var errs []string
		for _, p := range order {
			res, err := p.client.CreateTranscription(ctx, openai.AudioRequest{Model: model, FilePath: name, Reader: bytes.NewReader(raw)})
			if err == nil {
				cd.clear(p.id)
				return res.Text, nil
			}
			errs = append(errs, fmt.Sprintf("llm profile %q: %s", p.name, core.Redact(err.Error())))
			if ctx.Err() != nil || !transcribeFallback(err) {
				break
			}
			cd.set(p.id, busyCooldown, "failed")
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
