package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Where a profile's context window comes from (Agent.ContextWindow).
const (
	// WindowConfig: the profile's context_window.
	WindowConfig = "config"
	// WindowServer: the server's model list said it.
	WindowServer = "server"
	// WindowDefault: unknown; history takes core.Limits.HistoryTokenBudget
	// and a request is shortened only after the server says it is too long.
	WindowDefault = "default"
)

// windowReadTimeout bounds reading a profile's context window from its
// server, all requests and retries included; the first run on the profile
// waits at most this long for it.
const windowReadTimeout = 5 * time.Second

// ContextWindow is the context window in tokens that requests on the named
// profile are fitted to, and where it came from: WindowConfig,
// WindowServer (with the field that said it, e.g. "server (max_model_len)"),
// or WindowDefault with 0 tokens. The server is asked once per profile, on
// the first call of this or the first run on the profile, for at most
// windowReadTimeout; an unknown profile is 0, WindowDefault.
func (a *Agent) ContextWindow(profile string) (tokens int, source string) {
	pc, ok := a.clients[profile]
	if !ok {
		return 0, WindowDefault
	}
	return pc.contextWindow(), pc.windowSource
}

// contextWindow is the profile's context window in tokens, 0 when unknown:
// its configured ContextWindow, else what its server's model list says for
// the profile's model, read once (readWindow). A failure or a list without
// the window is logged once and leaves it unknown.
func (pc *providerClient) contextWindow() int {
	if pc.prov.ContextWindow > 0 {
		pc.windowOnce.Do(func() { pc.windowSource = WindowConfig })
		return pc.prov.ContextWindow
	}
	pc.windowOnce.Do(func() {
		pc.windowSource = WindowDefault
		ctx, cancel := context.WithTimeout(context.Background(), windowReadTimeout)
		defer cancel()
		n, field, err := readWindow(ctx, pc.hc, pc.prov)
		switch {
		case errors.Is(err, errNoModelInfo):
			n, err = 0, nil
		}
		switch {
		case err != nil:
			pc.log.Warn("could not read the model's context window from the server; set context_window on the llm profile",
				"profile", pc.name, "model", pc.prov.Model, "err", err)
		case n <= 0:
			pc.log.Info("the server's model list does not say the model's context window; set context_window on the llm profile to fit requests to it",
				"profile", pc.name, "model", pc.prov.Model)
		default:
			pc.served = n
			pc.windowSource = WindowServer + " (" + field + ")"
			pc.log.Info("context window read from the server", "profile", pc.name, "model", pc.prov.Model, "tokens", n, "field", field)
		}
	})
	return pc.served
}

// readWindow asks p's server for the context window of p.Model and returns
// it with the field that said it; 0 and no error when the server answers
// without one. OpenAI-compatible servers: the model's entry in GET
// {base}/models, max_model_len (vLLM) or context_length, else
// top_provider.context_length (OpenRouter); an entry with llama.cpp's meta
// object takes the server's own n_ctx from GET {root}/props
// (default_generation_settings.n_ctx), not the model's training length.
// Anthropic: max_input_tokens of GET /v1/models/{model}.
func readWindow(ctx context.Context, hc *http.Client, p Provider) (int, string, error) {
	if strings.EqualFold(p.API, APIAnthropic) {
		base := strings.TrimSuffix(strings.TrimSuffix(cmp.Or(p.BaseURL, "https://api.anthropic.com"), "/"), "/v1")
		var m struct {
			MaxInputTokens int `json:"max_input_tokens"`
		}
		if err := getJSON(ctx, hc, base+"/v1/models/"+url.PathEscape(p.Model), p, &m); err != nil {
			return 0, "", err
		}
		return m.MaxInputTokens, "max_input_tokens", nil
	}
	base := strings.TrimSuffix(cmp.Or(p.BaseURL, "https://api.openai.com/v1"), "/")
	var list struct {
		Data []struct {
			ID            string `json:"id"`
			MaxModelLen   int    `json:"max_model_len"`
			ContextLength int    `json:"context_length"`
			TopProvider   struct {
				ContextLength int `json:"context_length"`
			} `json:"top_provider"`
			Meta *struct {
				NCtxTrain int `json:"n_ctx_train"`
			} `json:"meta"`
		} `json:"data"`
	}
	if err := getJSON(ctx, hc, base+"/models", p, &list); err != nil {
		return 0, "", err
	}
	for _, m := range list.Data {
		if m.ID != p.Model && (p.Model != "" || len(list.Data) > 1) {
			continue
		}
		switch {
		case m.MaxModelLen > 0:
			return m.MaxModelLen, "max_model_len", nil
		case m.ContextLength > 0:
			return m.ContextLength, "context_length", nil
		case m.TopProvider.ContextLength > 0:
			return m.TopProvider.ContextLength, "top_provider.context_length", nil
		case m.Meta != nil:
			var props struct {
				Settings struct {
					NCtx int `json:"n_ctx"`
				} `json:"default_generation_settings"`
			}
			if err := getJSON(ctx, hc, strings.TrimSuffix(base, "/v1")+"/props", p, &props); err != nil {
				return 0, "", fmt.Errorf("llama.cpp /props: %w", err)
			}
			return props.Settings.NCtx, "/props default_generation_settings.n_ctx", nil
		}
		return 0, "", nil
	}
	return 0, "", nil
}

// errNoModelInfo is getJSON's error for a 404: the server does not serve
// the endpoint (or does not know the model), which says nothing is wrong.
var errNoModelInfo = errors.New("not served")

// getJSON makes one GET with p's key and decodes the JSON answer into v.
// Errors name the HTTP status, never the URL's secrets or the key.
func getJSON(ctx context.Context, hc *http.Client, rawURL string, p Provider, v any) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return errors.New("bad base URL")
	}
	u.RawQuery = "" // the transport adds the base URL's query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if strings.EqualFold(p.API, APIAnthropic) {
		req.Header.Set("Anthropic-Version", "2023-06-01")
		if p.APIKey != "" {
			req.Header.Set("X-Api-Key", p.APIKey)
		}
	} else if p.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.APIKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u.Path, unwrapURLError(err))
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
		_ = resp.Body.Close()
	}()
	if resp.StatusCode == http.StatusNotFound {
		return errNoModelInfo
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", u.Path, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: answer is not JSON: %w", u.Path, err)
	}
	return nil
}

// unwrapURLError drops the URL (which may hold a key in its query) from a
// client error.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// windowOrigin names where pc's context window came from for a person:
// "context_window" or "the window its server reports".
func windowOrigin(pc *providerClient) string {
	if pc.windowSource == WindowConfig {
		return "context_window"
	}
	return "the window its server reports"
}
