package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/admin"
	"openbot/core"
	"openbot/store/bolt"
)

// openStore opens a bolt store in the test's directory, closed at cleanup.
func openStore(t *testing.T) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// serveAPI serves an admin.Server over st on 127.0.0.1.
func serveAPI(t *testing.T, opts admin.Options) *httptest.Server {
	t.Helper()
	srv, err := admin.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs
}

// getJSON GETs url and decodes the JSON answer into v, failing on a status
// other than want.
func getJSON(t *testing.T, url string, want int, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s = %d %s, want %d", url, resp.StatusCode, body, want)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, body)
		}
	}
}

// pageOf is a decoded admin.Page with raw items.
type pageOf[T any] struct {
	Items []T    `json:"items"`
	Next  string `json:"next"`
}

// pageAll follows ?cursor= from the first page of base (which has its query
// started) until Next is empty, with a bound on the number of pages.
func pageAll[T any](t *testing.T, base string) (items []T, pages int) {
	t.Helper()
	cursor := ""
	for pages = 1; pages < 100; pages++ {
		url := base
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		var p pageOf[T]
		getJSON(t, url, http.StatusOK, &p)
		items = append(items, p.Items...)
		if p.Next == "" {
			return items, pages
		}
		cursor = p.Next
	}
	t.Fatalf("%s: more than 100 pages", base)
	return nil, 0
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	ID, Type, Data string
}

// sseClient reads one event stream until stopped.
type sseClient struct {
	resp   *http.Response
	cancel context.CancelFunc
	events chan sseEvent
	wg     sync.WaitGroup
}

// openStream opens GET url with Last-Event-ID lastID (when set) and reads its
// events into a channel.
func openStream(t *testing.T, url, lastID string) *sseClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
	}
	c := &sseClient{resp: resp, cancel: cancel, events: make(chan sseEvent, 1024)}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(c.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Type != "" {
					c.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Type = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[6:]
			}
		}
	}()
	t.Cleanup(c.close)
	return c
}

// next returns the next event, failing the test after a generous bound.
func (c *sseClient) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-c.events:
		if !ok {
			t.Fatal("event stream ended")
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20s")
	}
	return sseEvent{}
}

func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
	c.wg.Wait()
}

// update runs fn in one store transaction or fails the test.
func update(t *testing.T, st core.Store, fn func(tx core.Tx) error) {
	t.Helper()
	if err := st.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("must: %v", err))
	}
	return v
}
