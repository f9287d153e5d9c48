package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/net/netutil"
)

// egressPort is the proxy port inside a sandbox with the network on; the
// helper forwards it to the egress proxy's unix socket.
const egressPort = "127.0.0.1:3128"

// egressSocket is where the proxy's socket appears inside the sandbox.
const egressSocket = "/run/openbot/egress.sock"

// egress is one command's way out: an HTTP proxy (CONNECT for HTTPS and any
// TCP stream, absolute-URI requests for plain HTTP) on a unix socket that is
// bound into that command's sandbox, whose own network namespace has nothing
// else. Every connection goes through the fetcher's dial: public addresses and
// fetch_allow_hosts only, names resolved here. It lives as long as the command.
type egress struct {
	dir    string // private directory holding the socket
	sock   string
	ln     net.Listener
	srv    *http.Server
	done   chan struct{}
	mu     sync.Mutex
	dial   func(ctx context.Context, network, addr string) (net.Conn, error) // the guarded dialer
	log    *slog.Logger
	conns  map[net.Conn]bool // hijacked tunnels, closed with the proxy
	open   sync.WaitGroup    // tunnels still joining
	closed bool
}

// maxTunnels bounds one command's open CONNECT tunnels; maxConns its
// connections to the proxy (tunnels, requests and idle ones together).
const (
	maxTunnels = 64
	maxConns   = 80
)

// startEgress opens a proxy for one command; dial is the guarded dialer.
// close must be called when the command has ended.
func startEgress(dial func(ctx context.Context, network, addr string) (net.Conn, error), log *slog.Logger) (*egress, error) {
	dir, err := os.MkdirTemp("", "openbot-egress-")
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	// The sandbox may run as another user id than openbot's own (a user
	// namespace maps it back), so the socket is open to connect; the directory
	// is reachable only through the bind into that one sandbox.
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	sock := filepath.Join(dir, "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	_ = os.Chmod(sock, 0o666)
	// The socket is inside the sandbox, so a command may connect to it
	// directly: at most maxConns are served at once, the rest wait in the
	// kernel's queue, costing openbot nothing.
	ln = netutil.LimitListener(ln, maxConns)
	e := &egress{dir: dir, sock: sock, ln: ln, dial: dial, log: log, done: make(chan struct{}), conns: map[net.Conn]bool{}}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		MaxIdleConns:          4,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = pr.In.URL
			pr.Out.Host = pr.In.Host
		},
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			e.refuse(w, r.Host, err)
		},
	}
	tunnels := make(chan struct{}, maxTunnels)
	e.srv = &http.Server{
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       30 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodConnect:
				select {
				case tunnels <- struct{}{}:
					defer func() { <-tunnels }()
					e.tunnel(w, r)
				default:
					http.Error(w, "openbot egress: too many open connections", http.StatusServiceUnavailable)
				}
			case r.URL.IsAbs() && (r.URL.Scheme == "http"):
				rp.ServeHTTP(w, r)
			default:
				http.Error(w, "openbot egress: this is an HTTP proxy; send absolute http:// URLs or CONNECT", http.StatusBadRequest)
			}
		}),
	}
	go func() { defer close(e.done); _ = e.srv.Serve(ln) }()
	return e, nil
}

// refuse answers a request the proxy could not or would not forward, saying
// why: the guard's refusal is 403, any other failure 502.
func (e *egress) refuse(w http.ResponseWriter, host string, err error) {
	if errors.Is(err, ErrBlockedAddress) {
		e.log.Debug("shell egress refused", "host", host, "err", err) // the command sees it; a loop must not flood the log
		http.Error(w, fmt.Sprintf("openbot egress refused %s: %v (the shell's network reaches public internet hosts only)", host, unwrapURLErr(err)), http.StatusForbidden)
		return
	}
	http.Error(w, fmt.Sprintf("openbot egress: %s: %v", host, unwrapURLErr(err)), http.StatusBadGateway)
}

// tunnel serves CONNECT host:port: it dials through the guard and then joins
// the two streams until either ends or the proxy closes.
func (e *egress) tunnel(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	up, err := e.dial(ctx, "tcp", r.Host)
	cancel()
	if err != nil {
		e.refuse(w, r.Host, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "openbot egress: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !e.track(down, up) {
		return
	}
	defer e.untrack(down, up)
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	if n := buf.Reader.Buffered(); n > 0 { // bytes the client sent after the request
		b, _ := buf.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	join(down, up)
}

// track records a tunnel's two ends so close can end them; false (and both
// closed) once the proxy is closing.
func (e *egress) track(cs ...net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		e.conns[c] = true
	}
	e.open.Add(1)
	return true
}

func (e *egress) untrack(cs ...net.Conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(e.conns, c)
	}
	e.open.Done()
}

// close stops the proxy, ends its open tunnels and removes the socket.
func (e *egress) close() {
	e.mu.Lock()
	e.closed = true
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if e.srv.Shutdown(ctx) != nil {
		_ = e.srv.Close()
	}
	<-e.done
	e.open.Wait()
	os.RemoveAll(e.dir)
}
