package feishu

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// maxWebhookBody bounds a webhook request body.
const maxWebhookBody = 1 << 20

// Webhook request headers (https://open.feishu.cn/document/server-docs/event-subscription-guide/event-subscription-configure-/encrypt-key-encryption-configuration-case).
const (
	headerTimestamp = "X-Lark-Request-Timestamp"
	headerNonce     = "X-Lark-Request-Nonce"
	headerSignature = "X-Lark-Signature"
)

// MountHTTP registers POST /feishu/<name>/events (event subscription request URL)
// and POST /feishu/<name>/card (card callback request URL) on mux (issue 5 item 3).
func (a *Adapter) MountHTTP(mux *http.ServeMux) {
	mux.HandleFunc("POST /feishu/"+a.name+"/events", func(w http.ResponseWriter, r *http.Request) { a.serve(w, r, false) })
	mux.HandleFunc("POST /feishu/"+a.name+"/card", func(w http.ResponseWriter, r *http.Request) { a.serve(w, r, true) })
}

// rejection is a request refused before it was parsed as an event.
type rejection struct {
	status int
	reason string
}

// open authenticates and decrypts one request body, in the order that lets nothing
// unauthenticated be parsed (DESIGN.md §9):
//
//  1. With an EncryptKey and an X-Lark-Signature header, the signature
//     SHA-256(timestamp + nonce + encrypt key + body) must match; on the card URL a
//     legacy SHA-1(timestamp + nonce + verification token + body) also counts.
//  2. {"encrypt": ...} is decrypted with the EncryptKey (none configured: refused).
//  3. A body that was not signed is accepted only as a url_verification challenge
//     (the platform does not sign those) whose token matches.
//  4. The verification token of a v2 event (header.token) or challenge must match.
func (a *Adapter) open(r *http.Request, body []byte, card bool) (*envelope, *rejection) {
	signed := false
	if sig := r.Header.Get(headerSignature); sig != "" {
		ts, nonce := r.Header.Get(headerTimestamp), r.Header.Get(headerNonce)
		switch {
		case a.encryptKey != "" && equalSig(sig, Signature(ts, nonce, a.encryptKey, body)):
			signed = true
		case card && a.token != "" && equalSig(sig, LegacyCardSignature(ts, nonce, a.token, body)):
			signed = true
		case a.encryptKey == "" && !card:
			// Without an encrypt key there is nothing to check the signature with;
			// the verification token below is the authenticity check.
		default:
			return nil, &rejection{http.StatusUnauthorized, "bad signature"}
		}
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, &rejection{http.StatusBadRequest, "body is not JSON"}
	}
	if env.Encrypt != nil {
		if a.encryptKey == "" {
			return nil, &rejection{http.StatusBadRequest, "encrypted body but no encrypt_key configured"}
		}
		plain, err := Decrypt(a.encryptKey, *env.Encrypt)
		if err != nil {
			return nil, &rejection{http.StatusBadRequest, "undecryptable body"}
		}
		env = envelope{}
		if err := json.Unmarshal(plain, &env); err != nil || env.Encrypt != nil {
			return nil, &rejection{http.StatusBadRequest, "decrypted body is not an event"}
		}
	}
	if env.Type == "url_verification" {
		if a.token != "" && !equalToken(env.Token, a.token) {
			return nil, &rejection{http.StatusUnauthorized, "wrong verification token"}
		}
		return &env, nil
	}
	if a.encryptKey != "" && !signed {
		return nil, &rejection{http.StatusUnauthorized, "missing signature"}
	}
	if env.Schema == "2.0" {
		if a.token != "" && !equalToken(env.Header.Token, a.token) {
			return nil, &rejection{http.StatusUnauthorized, "wrong verification token"}
		}
	} else if !signed {
		// A legacy (v1 or flat card) body carries no verification token we can
		// rely on; only a valid signature authenticates it.
		return nil, &rejection{http.StatusUnauthorized, "unsigned legacy body"}
	}
	return &env, nil
}

func equalToken(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// serve handles one webhook request: authenticate and decrypt (open), answer a
// challenge, else dispatch the event and answer 200 only after the durable ingest.
// A refused request gets 4xx and a log line; a failed ingest gets 5xx, so the
// platform redelivers it.
func (a *Adapter) serve(w http.ResponseWriter, r *http.Request, card bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		a.log.Warn("feishu webhook body unreadable", "path", r.URL.Path, "err", err)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	env, rej := a.open(r, body, card)
	if rej != nil {
		a.log.Warn("feishu webhook request refused", "path", r.URL.Path, "reason", rej.reason, "remote", r.RemoteAddr)
		http.Error(w, rej.reason, rej.status)
		return
	}
	if env.Type == "url_verification" {
		writeJSON(w, map[string]string{"challenge": env.Challenge})
		return
	}
	if isCardAction(env) {
		writeJSON(w, a.cardAction(r.Context(), env))
		return
	}
	if card {
		a.log.Info("feishu card callback of an unknown shape ignored", "event_type", env.Header.EventType)
		writeJSON(w, map[string]any{})
		return
	}
	if err := a.handleEvent(r.Context(), env); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, errNotReady) || errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusServiceUnavailable
		}
		a.log.Warn("feishu event not handled; the platform will redeliver", "event_id", env.Header.EventID, "err", err)
		http.Error(w, "not handled", status)
		return
	}
	writeJSON(w, map[string]string{"msg": "success"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}
