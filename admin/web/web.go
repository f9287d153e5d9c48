// Package web is the operator's web dashboard (DESIGN.md §10): a small static
// page with plain JavaScript that reads and answers through the console API under
// /api/v1 (the API is the contract; the page has no other data source), compiled
// into the binary with go:embed. It needs no CDN and no Node toolchain.
//
// Login: POST /login with the admin token (constant-time compare) sets a random
// session id in an HttpOnly, SameSite=Strict cookie (Secure when the request
// came over TLS or with "X-Forwarded-Proto: https", or always with
// Options.SecureCookie). Sessions live in memory with an expiry and a bounded count.
// Bearer guards the other admin endpoints with the same token. Wrong tokens, at
// the form and the bearer door alike, are counted per client address: past
// MaxFailedLogins a minute that client gets 429, and no one else does.
// The cookie authorizes /api/v1 requests of the page (Guard); a cookie
// authorized request that changes state must carry the session's CSRF token in
// the X-CSRF-Token header. With no admin token the dashboard is off: every
// route answers 404, as for a path that does not exist (DESIGN.md §9).
//
// Nothing secret is rendered: the page shows what the API serves, and the API
// strips button tokens and transcripts. The CSRF token of the session is the
// only per-session value in the page.
package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"html"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Limits of the dashboard's sessions.
const (
	// DefaultSessionTTL is how long a login lasts (not extended by use).
	DefaultSessionTTL = 12 * time.Hour
	// DefaultMaxSessions bounds the sessions kept in memory; a login past it
	// drops the session that expires first.
	DefaultMaxSessions = 64
	// CookieName is the session cookie's name.
	CookieName = "openbot_session"
	// CSRFHeader carries the session's CSRF token on state-changing API calls.
	CSRFHeader = "X-CSRF-Token"
	// maxForm bounds a login or logout body (bytes).
	maxForm = 4096
	// MaxFailedLogins is how many wrong admin tokens (dashboard logins and
	// bearer tokens together) are taken per minute from one client: a client is
	// the connection's remote address, an IPv6 one up to its /64
	// (X-Forwarded-For is not trusted). Past it that client's logins and bearer
	// requests answer 429 until its minute ends. Other clients are not held back.
	MaxFailedLogins = 10
	// refusalLogEvery paces the WARN lines of refused admin tokens: one at
	// most per this interval, carrying the count of those not logged.
	refusalLogEvery = 10 * time.Second
	// maxFailureClients bounds the clients whose wrong tokens are counted.
	maxFailureClients = 4096
)

// Options configure a Dashboard.
type Options struct {
	// Token is the admin token (admin.token); empty turns the dashboard off.
	Token string
	// SessionTTL is how long a login lasts (default DefaultSessionTTL);
	// MaxSessions how many are kept (default DefaultMaxSessions).
	SessionTTL  time.Duration
	MaxSessions int
	// SecureCookie marks the session cookie Secure on every response
	// (admin.secure_cookie), for a deployment whose proxy terminates TLS
	// without sending X-Forwarded-Proto. Without it the cookie is Secure when
	// the request came over TLS or with "X-Forwarded-Proto: https" (a spoofed
	// header only makes the cookie stricter).
	SecureCookie bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnRefused, when set, is called for each refused admin token with the door
	// ("login" or "bearer") and the outcome ("wrong_token", "missing" for a
	// bearer request without a token, "throttled" for a client past
	// MaxFailedLogins), for a metric. It must not block.
	OnRefused func(door, outcome string)
	Logger    *slog.Logger
}

// Dashboard serves the web dashboard and authorizes the page's API calls.
// Safe for concurrent use.
type Dashboard struct {
	opts     Options
	want     [32]byte // sha256 of the token
	sessions *sessions
	pages    map[string]string // page name: its HTML with {{name}} placeholders
	fails    failures
	assets   http.Handler
}

// New builds a Dashboard; it does no I/O. An empty Options.Token gives a
// Dashboard whose routes answer 404 and whose Guard is the bearer handler alone.
func New(opts Options) *Dashboard {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	sub, _ := fs.Sub(static, "static")
	d := &Dashboard{
		opts:     opts,
		want:     sha256.Sum256([]byte(opts.Token)),
		sessions: newSessions(opts.MaxSessions, opts.SessionTTL, opts.Now),
		pages:    map[string]string{},
		assets:   http.StripPrefix("/ui/", http.FileServerFS(sub)),
	}
	for _, name := range []string{"app.html", "login.html"} {
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			panic("admin/web: embedded page missing: " + name) // a build error, not input
		}
		d.pages[name] = string(b)
	}
	return d
}

// Off reports whether the dashboard is off (no admin token).
func (d *Dashboard) Off() bool { return d.opts.Token == "" }

// Mount registers the dashboard's routes on mux: GET / (the app, or the login
// form without a session), POST /login, POST /logout and GET /ui/ (the page's
// script and style). They are more specific than a catch-all "/" pattern, which
// keeps serving every other path.
func (d *Dashboard) Mount(mux *http.ServeMux) {
	mux.Handle("GET /{$}", d.secure(d.index))
	mux.Handle("POST /login", d.secure(d.login))
	mux.Handle("POST /logout", d.secure(d.logout))
	mux.Handle("GET /ui/", d.secure(d.asset))
}

// Guard authorizes API requests: a request without an Authorization header
// and with a valid session cookie is served by api (state-changing methods
// only with the session's CSRF token in X-CSRF-Token, else 403); every other
// request goes to bearer (the bearer-token guard). Off: bearer alone.
func (d *Dashboard) Guard(bearer, api http.Handler) http.Handler {
	if d.Off() {
		return bearer
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if s, ok := d.session(r); ok {
				w.Header().Set("Cache-Control", "no-store")
				if !safeMethod(r.Method) && !s.csrfOK(r.Header.Get(CSRFHeader)) {
					http.Error(w, "forbidden: missing or wrong "+CSRFHeader+" header", http.StatusForbidden)
					return
				}
				api.ServeHTTP(w, r)
				return
			}
		}
		bearer.ServeHTTP(w, r)
	})
}

// Bearer guards an admin endpoint of the shared listener (every endpoint but
// the platform webhooks, the dashboard's own pages and /healthz needs the admin
// token). The peer's address does not authorize anything: a same-host reverse
// proxy makes every request look local.
//
//   - dashboard off (no admin token): 404, as for a path that does not exist;
//   - a client past MaxFailedLogins wrong tokens in its minute: 429 with
//     Retry-After, the token not even looked at;
//   - no or wrong "Authorization: Bearer <token>": 401 with a bare
//     "unauthorized" and a WWW-Authenticate challenge; a wrong token counts
//     against the client;
//   - the right token: h serves the request.
//
// Every refusal goes to Options.OnRefused and to the paced WARN log.
func (d *Dashboard) Bearer(h http.Handler) http.Handler {
	if d.Off() {
		return http.NotFoundHandler()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		client, now := clientKey(r), d.opts.Now()
		if !d.fails.allow(client, now) {
			d.refused(r, "bearer", "throttled")
			w.Header().Set("Retry-After", "60")
			http.Error(w, "too many wrong tokens: wait a minute", http.StatusTooManyRequests)
			return
		}
		tok, ok := bearerToken(r)
		if !ok || !d.right(tok) {
			outcome := "missing"
			if ok {
				outcome = "wrong_token"
				d.fails.add(client, now)
			}
			d.refused(r, "bearer", outcome)
			w.Header().Set("WWW-Authenticate", `Bearer realm="openbot"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// right compares tok with the admin token; both sides are hashed first, so it
// takes the same time whatever the length or content of the guess.
func (d *Dashboard) right(tok string) bool {
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], d.want[:]) == 1
}

// refused records a refused admin token: the OnRefused hook, and a WARN line
// unless one was written less than refusalLogEvery ago.
func (d *Dashboard) refused(r *http.Request, door, outcome string) {
	if d.opts.OnRefused != nil {
		d.opts.OnRefused(door, outcome)
	}
	if ok, unlogged := d.fails.logLine(d.opts.Now()); ok {
		d.opts.Logger.Warn("admin token refused", "door", door, "outcome", outcome, "remote", r.RemoteAddr,
			"path", r.URL.Path, "unlogged_before", unlogged)
	}
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

// secure answers 404 while the dashboard is off and sets the headers every
// dashboard answer carries: no caching, no framing, scripts and styles from
// this origin only.
func (d *Dashboard) secure(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.Off() {
			http.NotFound(w, r)
			return
		}
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		h(w, r)
	})
}

func (d *Dashboard) asset(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; strings.HasSuffix(p, ".html") || strings.HasSuffix(p, "/") {
		http.NotFound(w, r) // pages are served filled in, at /; no listings
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	d.assets.ServeHTTP(w, r)
}

// index is GET /: the app with a session, else the login form.
func (d *Dashboard) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s, ok := d.session(r); ok {
		d.render(w, http.StatusOK, "app.html", "{{csrf}}", html.EscapeString(s.csrf))
		return
	}
	d.render(w, http.StatusOK, "login.html", "{{error}}", "")
}

// login is POST /login (form field "token"). A cross-site post is refused; a
// wrong token shows the form again with 401 and says nothing more.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !sameOrigin(r) {
		http.Error(w, "forbidden: cross-site request", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad request: want a form with a token field", http.StatusBadRequest)
		return
	}
	client, now := clientKey(r), d.opts.Now()
	if !d.fails.allow(client, now) {
		d.refused(r, "login", "throttled")
		w.Header().Set("Retry-After", "60")
		http.Error(w, "too many failed sign-ins: wait a minute", http.StatusTooManyRequests)
		return
	}
	if !d.right(r.PostForm.Get("token")) {
		d.fails.add(client, now)
		d.refused(r, "login", "wrong_token")
		d.render(w, http.StatusUnauthorized, "login.html", "{{error}}", `<p class="error" role="alert">That token is not the admin token.</p>`)
		return
	}
	id, s := d.sessions.create()
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: id, Path: "/",
		Expires: s.expires, MaxAge: int(d.opts.SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: d.secureCookie(r),
	})
	d.opts.Logger.Info("dashboard login", "remote", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout is POST /logout (form field "csrf" or the X-CSRF-Token header): the
// session ends and the cookie is cleared.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	_ = r.ParseForm()
	if c, err := r.Cookie(CookieName); err == nil {
		s, ok := d.sessions.get(c.Value)
		tok := r.Header.Get(CSRFHeader)
		if tok == "" {
			tok = r.PostForm.Get("csrf")
		}
		if ok && !s.csrfOK(tok) {
			http.Error(w, "forbidden: missing or wrong CSRF token", http.StatusForbidden)
			return
		}
		d.sessions.drop(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: d.secureCookie(r)})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (d *Dashboard) session(r *http.Request) (session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return session{}, false
	}
	return d.sessions.get(c.Value)
}

// render writes a page with its placeholders replaced (old, new pairs; the
// new texts are HTML already). The pages are static but for these few values,
// so no template engine is linked in (text/template's reflection keeps every
// exported method of the binary and costs megabytes).
func (d *Dashboard) render(w http.ResponseWriter, status int, name string, oldnew ...string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, strings.NewReplacer(oldnew...).Replace(d.pages[name]))
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameOrigin reports whether a browser sent r from this origin: a
// Sec-Fetch-Site other than same-origin or none is a cross-site request; a
// browser without it is judged by an Origin whose host is not the request's.
// Clients that send neither (curl) pass.
// secureCookie reports whether the session cookie is marked Secure for r.
func (d *Dashboard) secureCookie(r *http.Request) bool {
	return d.opts.SecureCookie || r.TLS != nil ||
		strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

// clientKey is the key of the wrong-token throttle: the host of the
// connection's remote address, an IPv6 one cut to its /64 (one subscriber's
// usual allocation); X-Forwarded-For is not trusted, as any client can send it.
func clientKey(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		h = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return h
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return s == "same-origin" || s == "none"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}
