package telegram

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"openbot/core"
)

// SecretHeader is the header Telegram sets on webhook POSTs to setWebhook's
// secret_token (core.telegram.org/bots/api#setwebhook).
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// maxWebhookBody bounds a webhook request body; one Update is far smaller.
const maxWebhookBody = 1 << 20

// WebhookPath is where an account's webhook is served: "/telegram/<name>/webhook".
func WebhookPath(name string) string { return "/telegram/" + name + "/webhook" }

// MountHTTP implements core.WebhookMounter: POST /telegram/<name>/webhook
// (DESIGN.md §9). In polling mode nothing is mounted. The secret header is
// compared in constant time before the body is read (401 and a WARN line on
// mismatch); an undecodable update is logged at WARN and acknowledged; an update is
// answered 200 only after Ingest stored it, 500 otherwise (Telegram redelivers),
// 503 before Run has learned the bot's identity.
func (a *Adapter) MountHTTP(mux *http.ServeMux) {
	if a.mode != ModeWebhook {
		return
	}
	mux.HandleFunc("POST "+WebhookPath(a.name), a.serveWebhook)
	a.ingress.MarkLive()
}

func (a *Adapter) serveWebhook(w http.ResponseWriter, r *http.Request) {
	got := r.Header.Get(SecretHeader)
	if subtle.ConstantTimeCompare([]byte(got), []byte(a.secret)) != 1 {
		a.log.Warn("webhook request with a wrong secret token", "remote", r.RemoteAddr)
		core.ReportInbound(a.engine, "telegram", core.InboundRefused)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	// From here the request carries the secret, so it comes from Telegram: a body
	// that cannot be read or decoded is logged and acknowledged, since a
	// redelivery could not fix it and would hold back the updates behind it.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		a.log.Warn("webhook update unreadable or too large; acknowledged", "err", err)
		core.ReportInbound(a.engine, "telegram", core.InboundDropped)
		w.WriteHeader(http.StatusOK)
		return
	}
	var u update
	if err := json.Unmarshal(body, &u); err != nil {
		a.log.Warn("webhook update is not JSON; acknowledged", "err", err, "bytes", len(body))
		core.ReportInbound(a.engine, "telegram", core.InboundDropped)
		w.WriteHeader(http.StatusOK)
		return
	}
	if err := a.handleUpdate(r.Context(), u); err != nil {
		if errors.Is(err, errNotReady) {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		a.log.Error("webhook update not stored", "update_id", u.UpdateID, "err", err)
		http.Error(w, "not stored", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}
