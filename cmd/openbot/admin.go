package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// adminOnly guards an admin endpoint of the shared listener (DESIGN.md §9: every
// endpoint but platform webhooks and /healthz needs the admin bearer token). The
// peer's address counts for nothing: a same-host reverse proxy makes every
// request look local.
//
//   - token empty (admin.token unset): the endpoint is off and answers 404, as
//     for a path that does not exist;
//   - no or wrong "Authorization: Bearer <token>": 401 with a bare
//     "unauthorized" and a WWW-Authenticate challenge, nothing else;
//   - the right token: h serves the request.
//
// The comparison hashes both sides first, so it takes the same time whatever the
// length or content of the guess.
func adminOnly(token string, h http.Handler) http.Handler {
	if token == "" {
		return http.NotFoundHandler()
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		got, ok := bearerToken(r)
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="openbot"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
