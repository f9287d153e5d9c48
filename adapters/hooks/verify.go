package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Kinds of trigger: how a request proves it comes from the sender.
const (
	// KindGitHub checks X-Hub-Signature-256: "sha256=" and the hex HMAC-SHA256
	// of the raw body under the webhook's secret.
	KindGitHub = "github"
	// KindSentry checks Sentry-Hook-Signature: the hex HMAC-SHA256 of the raw
	// body under the integration's client secret.
	KindSentry = "sentry"
	// KindHMAC checks X-Signature: "sha256=" and the hex HMAC-SHA256 of
	// "<X-Signature-Timestamp>.<raw body>", the timestamp in Unix seconds and
	// within Trigger.Window of now.
	KindHMAC = "hmac"
	// KindBearer checks Authorization: "Bearer <secret>".
	KindBearer = "bearer"
)

// Kinds lists every kind, for config validation.
var Kinds = []string{KindGitHub, KindSentry, KindHMAC, KindBearer}

// verify checks that body and hdr were sent by someone holding t's secret, in
// constant time, before anything parses the body. The error says why not, for
// the log only: the caller answers every refusal alike.
func verify(t *Trigger, hdr http.Header, body []byte, now time.Time) error {
	switch t.Kind {
	case KindGitHub:
		sig, ok := strings.CutPrefix(hdr.Get("X-Hub-Signature-256"), "sha256=")
		if !ok {
			return errors.New("no X-Hub-Signature-256 sha256= header")
		}
		return macEqual(t.Secret, body, sig)
	case KindSentry:
		sig := hdr.Get("Sentry-Hook-Signature")
		if sig == "" {
			return errors.New("no Sentry-Hook-Signature header")
		}
		return macEqual(t.Secret, body, sig)
	case KindHMAC:
		ts := hdr.Get("X-Signature-Timestamp")
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return errors.New("no X-Signature-Timestamp in Unix seconds")
		}
		if d := now.Sub(time.Unix(sec, 0)); d > t.Window || d < -t.Window {
			return errors.New("timestamp outside the window")
		}
		sig, ok := strings.CutPrefix(hdr.Get("X-Signature"), "sha256=")
		if !ok {
			return errors.New("no X-Signature sha256= header")
		}
		return macEqual(t.Secret, append([]byte(ts+"."), body...), sig)
	case KindBearer:
		got, ok := strings.CutPrefix(hdr.Get("Authorization"), "Bearer ")
		// Compared as hashes, so neither the length nor a prefix of the
		// token shows in the time taken.
		a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(t.Secret))
		if subtle.ConstantTimeCompare(a[:], b[:]) != 1 || !ok {
			return errors.New("wrong or missing bearer token")
		}
		return nil
	}
	return errors.New("unknown kind")
}

// Sign returns the hex HMAC-SHA256 of msg under secret, as GitHub, Sentry and
// the hmac kind send it (GitHub and hmac prefix "sha256=").
func Sign(secret string, msg []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(msg)
	return hex.EncodeToString(m.Sum(nil))
}

func macEqual(secret string, msg []byte, sigHex string) error {
	got, err := hex.DecodeString(strings.TrimSpace(sigHex))
	if err != nil {
		return errors.New("signature is not hex")
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(msg)
	if !hmac.Equal(got, m.Sum(nil)) {
		return errors.New("signature does not match")
	}
	return nil
}
