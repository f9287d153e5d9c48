package hooks

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
)

// FuzzHooks sends arbitrary paths, bodies and signature headers: the handler
// never panics, answers 202, 400 or the one refusal, and stores nothing that
// is not signed with the trigger's secret.
func FuzzHooks(f *testing.F) {
	f.Add("github", []byte(`{"action":"opened"}`), "pull_request", "sha256=00", "")
	f.Add("github", []byte(`{"action":"opened","pull_request":{"number":1}}`), "pull_request", "", ghSecret)
	f.Add("sentry", []byte(`[]`), "issue", "zz", sentrySecret)
	f.Add("deploys", []byte(`{"event":"x"}`), "", "sha256=", "")
	f.Add("alerts", []byte(`null`), "", "Bearer x", bearerToken)
	f.Add("nope/../github", []byte{0xff, 0x00}, "", "", "")
	f.Fuzz(func(t *testing.T, name string, body []byte, event, sig, signWith string) {
		s, eng, _ := newTestServer(t, testTriggers())
		if strings.ContainsAny(name, "?#% \t\r\n") {
			name = "x"
		}
		r := httptest.NewRequest(http.MethodPost, "/hooks/x", bytes.NewReader(body))
		r.URL.Path = "/hooks/" + name
		r.Header.Set("X-GitHub-Event", event)
		r.Header.Set("Sentry-Hook-Resource", event)
		r.Header.Set("X-Hub-Signature-256", sig)
		r.Header.Set("Sentry-Hook-Signature", sig)
		r.Header.Set("X-Signature", sig)
		r.Header.Set("Authorization", sig)
		if signWith != "" {
			r.Header.Set("X-Hub-Signature-256", "sha256="+Sign(signWith, body))
			r.Header.Set("Sentry-Hook-Signature", Sign(signWith, body))
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusAccepted, http.StatusBadRequest:
		case http.StatusForbidden:
			if w.Body.String() != "refused\n" {
				t.Errorf("refusal body %q", w.Body)
			}
		case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
			if path.Clean(r.URL.Path) == r.URL.Path {
				t.Errorf("status %d for a clean path", w.Code) // the mux redirects only unclean ones
			}
		default:
			t.Errorf("status %d", w.Code)
		}
		for _, in := range eng.inbounds() {
			tr := s.triggers[strings.TrimPrefix(string(in.SenderID), "trigger:")]
			if tr == nil || verify(&tr.Trigger, r.Header, body, now) != nil {
				t.Errorf("stored %q without a valid signature", in.DedupKey)
			}
		}
	})
}
