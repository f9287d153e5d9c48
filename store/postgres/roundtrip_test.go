package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"

	"openbot/core"
	"openbot/store/postgres"
	"openbot/store/postgres/pgtest"
)

// turnCounter is a TCP proxy to a PostgreSQL server that counts round trips:
// the times a client sends after the server last spoke (or first) on a
// connection.
type turnCounter struct {
	ln     net.Listener
	server string
	mu     sync.Mutex
	turns  int
}

func newTurnCounter(t *testing.T, server string) *turnCounter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tc := &turnCounter{ln: ln, server: server}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go tc.serve(c)
		}
	}()
	return tc
}

func (tc *turnCounter) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", tc.server)
	if err != nil {
		return
	}
	defer s.Close()
	serverSpoke := true
	pump := func(dst, src net.Conn, fromClient bool) {
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				tc.mu.Lock()
				if fromClient && serverSpoke {
					tc.turns++
				}
				serverSpoke = !fromClient
				tc.mu.Unlock()
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				_ = dst.Close()
				return
			}
		}
	}
	go pump(c, s, false)
	pump(s, c, true)
}

func (tc *turnCounter) count() int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.turns
}

// TestIngestRoundTrips counts the round trips an Ingest into a known thread
// costs on PostgreSQL (docs/ARCHITECTURE.md, "pipe.go"), through a counting
// proxy, once connections and their statement caches are warm.
func TestIngestRoundTrips(t *testing.T) {
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	tc := newTurnCounter(t, u.Host)
	u.Host = tc.ln.Addr().String()
	st, err := postgres.Open(t.Context(), u.String(), postgres.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := core.New(core.Options{Store: st, Agent: nopAgent{}, Bots: []core.BotProfile{{Handle: "engineer"}}})
	if err != nil {
		t.Fatal(err)
	}
	ingest := func(i int) {
		t.Helper()
		_, err := e.Ingest(t.Context(), core.Inbound{Account: "bench/local", Platform: "bench", DedupKey: fmt.Sprint("rt:", i),
			ThreadKey: "rt", Conversation: "main", SenderID: "bench:user", SenderName: "user",
			Text: "@engineer please look at this", StartThread: true})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		ingest(i)
	}
	const n = 10
	before := tc.count()
	for i := range n {
		ingest(100 + i)
	}
	per := float64(tc.count()-before) / n
	t.Logf("an ingest into a known thread: %.1f round trips", per)
	if per > maxIngestRoundTrips {
		t.Errorf("an ingest into a known thread costs %.1f round trips, want at most %d", per, maxIngestRoundTrips)
	}
}

// maxIngestRoundTrips is what an ingest into a known thread may cost: its 16
// statements with BEGIN and COMMIT, which ride with them (pipe.go).
const maxIngestRoundTrips = 10

type nopAgent struct{}

func (nopAgent) Execute(context.Context, *core.Job) (core.Result, error) {
	return core.Result{}, errors.New("not run")
}
