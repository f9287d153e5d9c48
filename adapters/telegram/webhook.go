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
// mismatch); an undecodable update, or one that carries nothing openbot handles,
// is logged at WARN and acknowledged; any other method or path under
// /telegram/<name>/ answers 404 with a WARN line; an update is
// answered 200 only after Ingest stored it, 500 otherwise (Telegram redelivers),
// 503 before Run has learned the bot's identity.
func (a *Adapter) MountHTTP(mux *http.ServeMux) {
	if a.mode != ModeWebhook {
		return
	}
	mux.HandleFunc("POST "+WebhookPath(a.name), a.serveWebhook)
	mux.HandleFunc("/telegram/"+a.name+"/", a.serveOther)
	a.ingress.MarkLive()
}

// serveOther refuses every other method or path under the account's prefix, with
// a WARN line, so a misconfigured webhook URL shows up in the log.
func (a *Adapter) serveOther(w http.ResponseWriter, r *http.Request) {
	a.log.Warn("webhook request refused: no such endpoint", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	core.ReportInbound(a.engine, "telegram", core.InboundRefused)
	http.NotFound(w, r)
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
	if reason := unusable(u); reason != "" {
		a.log.Warn("webhook update "+reason+"; acknowledged", "update_id", u.UpdateID, "bytes", len(body))
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

// unusable says why a decoded webhook update can be nothing openbot handles
// (a JSON null, {}, an update of a kind it did not ask for, a message without
// its chat), or "" when it may be.
func unusable(u update) string {
	switch {
	case u.Message == nil && u.EditedMessage == nil && u.CallbackQuery == nil:
		return "carries no message, edit or button click"
	case u.Message != nil && u.Message.Chat.ID == 0:
		return "has a message without a chat"
	}
	return ""
}
