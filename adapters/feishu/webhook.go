package feishu

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"openbot/core"
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
// and POST /feishu/<name>/card (card callback request URL) on mux (DESIGN.md §9);
// any other method or path under /feishu/<name>/ answers 404 with a WARN line.
func (a *Adapter) MountHTTP(mux *http.ServeMux) {
	mux.HandleFunc("POST /feishu/"+a.name+"/events", func(w http.ResponseWriter, r *http.Request) { a.serve(w, r, false) })
	mux.HandleFunc("POST /feishu/"+a.name+"/card", func(w http.ResponseWriter, r *http.Request) { a.serve(w, r, true) })
	mux.HandleFunc("/feishu/"+a.name+"/", func(w http.ResponseWriter, r *http.Request) {
		// Every other method or path: a misconfigured request URL shows in the log.
		a.log.Warn("feishu webhook request refused", "path", r.URL.Path, "method", r.Method, "reason", "no such endpoint", "remote", r.RemoteAddr)
		core.ReportInbound(a.engine, "feishu", core.InboundRefused)
		http.NotFound(w, r)
	})
	if a.mode == ModeWebhook {
		a.ingress.MarkLive()
	}
}

// Freshness window of a signed request's X-Lark-Request-Timestamp (DESIGN.md §9).
//
// Feishu pushes an event that was not answered 200 within 3 s again 15 s, 5 min,
// 1 h and 6 h later (at most 4 retries, so a retry may come about 7 h 5 min after
// the first push; Feishu's "receive events" guide tells servers to deduplicate
// over 7.1 h). The guide does not say whether a retry carries a fresh timestamp or
// the first push's, so the window assumes the worst: the original timestamp on the
// last retry. Eight hours covers that whole schedule, with room for the platform's
// own queueing, and still refuses the weeks-old captured request that a replay
// would be; a redelivered message that got through before is a duplicate in core
// anyway. maxClockSkew allows for a platform clock ahead of ours.
const (
	maxRequestAge = 8 * time.Hour
	maxClockSkew  = 5 * time.Minute
)

// maxUnsignedBody bounds the one unsigned request, an encrypted url_verification
// challenge (about 200 bytes), so its handling costs the same small amount
// whatever it carries.
const maxUnsignedBody = 4 << 10

// rejection is a request that is not processed. A refused one (ack false) gets the
// one answer every refusal gets (refuse), whatever the reason, so the answer tells
// the caller nothing; an authentic but malformed one (ack true) is acknowledged so
// the platform does not redeliver it. Either way the reason goes to the WARN log.
type rejection struct {
	reason string
	ack    bool
}

func refused(reason string) *rejection { return &rejection{reason: reason} }

// refuse writes the answer to every refused request: 401 "request refused".
func refuse(w http.ResponseWriter) { http.Error(w, "request refused", http.StatusUnauthorized) }

// open authenticates and decrypts one request body, in the order that lets nothing
// unauthenticated be parsed (DESIGN.md §9):
//
//  1. With an EncryptKey and an X-Lark-Signature header, the signature
//     SHA-256(timestamp + nonce + encrypt key + body) over the raw body must match
//     before any base64, AES or JSON work; on the card URL a legacy
//     SHA-1(timestamp + nonce + verification token + body) also counts. A signed
//     request must be fresh (maxRequestAge, maxClockSkew).
//  2. With an EncryptKey, an unsigned request can only be the url_verification
//     challenge, the one request the platform does not sign; openChallenge
//     answers every other unsigned body alike.
//  3. {"encrypt": ...} is decrypted with the EncryptKey (none configured: refused).
//     With an EncryptKey a plaintext body is refused, but for a legacy card
//     callback (signed with the verification token), which may come in clear.
//  4. The verification token of a v2 event (header.token) or challenge must match.
//
// A signed body that does not decrypt or parse is acknowledged (logged, not
// redelivered): the platform sent it, and sending it again cannot fix it.
func (a *Adapter) open(r *http.Request, body []byte, card bool) (*envelope, *rejection) {
	signed, legacyCard := false, false
	if sig := r.Header.Get(headerSignature); sig != "" {
		ts, nonce := r.Header.Get(headerTimestamp), r.Header.Get(headerNonce)
		switch {
		case a.encryptKey != "" && equalSig(sig, Signature(ts, nonce, a.encryptKey, body)):
			signed = true
		case card && a.token != "" && equalSig(sig, LegacyCardSignature(ts, nonce, a.token, body)):
			signed, legacyCard = true, true
		case a.encryptKey == "" && !card:
			// Without an encrypt key there is nothing to check the signature with;
			// the verification token below is the authenticity check.
		default:
			return nil, refused("bad signature")
		}
		if signed {
			if reason := a.stale(ts); reason != "" {
				return nil, refused(reason)
			}
		}
	}
	if a.encryptKey != "" && !signed {
		return a.openChallenge(body)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		if signed {
			return nil, &rejection{reason: "signed body is not JSON", ack: true}
		}
		return nil, refused("body is not JSON")
	}
	if env.Encrypt == nil && a.encryptKey != "" && !legacyCard {
		// With an encrypt key the platform encrypts every event and v2 card
		// callback; a plaintext one did not come from it as configured.
		return nil, refused("plaintext body while encrypt_key is set")
	}
	if env.Encrypt != nil {
		if a.encryptKey == "" {
			return nil, refused("encrypted body but no encrypt_key configured")
		}
		plain, err := Decrypt(a.encryptKey, *env.Encrypt)
		if err != nil {
			return nil, &rejection{reason: "signed body does not decrypt", ack: true}
		}
		env = envelope{}
		if err := json.Unmarshal(plain, &env); err != nil || env.Encrypt != nil {
			return nil, &rejection{reason: "signed body does not decrypt to an event", ack: true}
		}
	}
	if env.Type == "url_verification" {
		if a.token != "" && !equalToken(env.Token, a.token) {
			return nil, refused("wrong verification token")
		}
		return &env, nil
	}
	if env.Schema == "2.0" {
		if a.token != "" && !equalToken(env.Header.Token, a.token) {
			return nil, refused("wrong verification token")
		}
	} else if !signed {
		// A legacy (v1 or flat card) body carries no verification token we can
		// rely on; only a valid signature authenticates it.
		return nil, refused("unsigned legacy body")
	}
	return &env, nil
}

// stale returns why a signed request's X-Lark-Request-Timestamp (unix seconds) is
// refused, or "" when it is within the freshness window.
func (a *Adapter) stale(ts string) string {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "signed request without a valid timestamp"
	}
	age := a.clock.Now().Sub(time.Unix(sec, 0))
	switch {
	case age > maxRequestAge:
		return "signed request too old (age " + age.Round(time.Second).String() + ")"
	case age < -maxClockSkew:
		return "signed request from the future (" + (-age).Round(time.Second).String() + " ahead)"
	}
	return ""
}

// openChallenge handles an unsigned request while an EncryptKey is set: only a
// url_verification challenge with the right token (encrypted, or plain) is
// accepted. Every other body, whether its "encrypt" is not base64, does not
// decrypt to valid padding, decrypts to something that is not JSON, or is JSON
// but not a challenge, is refused with one reason and one answer, after the same
// work: base64, a full AES-CBC decryption with a constant-time padding check, and
// a JSON parse run whatever came before (its cost varies with the decrypted
// bytes, not with whether their padding was valid). Distinct answers here would be
// a CBC padding oracle over captured events (DESIGN.md §9).
func (a *Adapter) openChallenge(body []byte) (*envelope, *rejection) {
	const reason = "unsigned request that is not a url_verification challenge"
	if len(body) > maxUnsignedBody {
		return nil, refused(reason)
	}
	var outer envelope
	ok := boolInt(json.Unmarshal(body, &outer) == nil)
	env := outer
	if outer.Encrypt != nil || ok == 0 {
		enc := ""
		if outer.Encrypt != nil {
			enc = *outer.Encrypt
		}
		raw, err := base64.StdEncoding.DecodeString(enc)
		ok &= boolInt(err == nil)
		plain, padOK := decryptBlocks(a.encryptKey, raw)
		env = envelope{}
		ok &= padOK & boolInt(json.Unmarshal(plain, &env) == nil)
	}
	ok &= boolInt(env.Type == "url_verification" && env.Encrypt == nil)
	ok &= boolInt(a.token == "" || equalToken(env.Token, a.token))
	if ok != 1 {
		return nil, refused(reason)
	}
	return &env, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func equalToken(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// serve handles one webhook request: authenticate and decrypt (open), answer a
// challenge, else dispatch the event and answer 200 only after the durable ingest.
// A refused request gets the one refusal answer (refuse) and a WARN line naming
// the reason; an authentic but malformed one is logged at WARN and acknowledged;
// a failed ingest gets 5xx, so the platform redelivers it.
func (a *Adapter) serve(w http.ResponseWriter, r *http.Request, card bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		a.log.Warn("feishu webhook request refused", "path", r.URL.Path, "reason", "body unreadable or too large", "remote", r.RemoteAddr)
		core.ReportInbound(a.engine, "feishu", core.InboundDropped)
		refuse(w)
		return
	}
	env, rej := a.open(r, body, card)
	switch {
	case rej != nil && rej.ack:
		a.log.Warn("feishu webhook request malformed; acknowledged", "path", r.URL.Path, "reason", rej.reason, "remote", r.RemoteAddr)
		core.ReportInbound(a.engine, "feishu", core.InboundDropped)
		writeJSON(w, map[string]any{})
		return
	case rej != nil:
		a.log.Warn("feishu webhook request refused", "path", r.URL.Path, "reason", rej.reason, "remote", r.RemoteAddr)
		core.ReportInbound(a.engine, "feishu", core.InboundRefused)
		refuse(w)
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
		a.log.Warn("feishu card callback of an unknown shape; acknowledged", "event_type", env.Header.EventType)
		core.ReportInbound(a.engine, "feishu", core.InboundDropped)
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
