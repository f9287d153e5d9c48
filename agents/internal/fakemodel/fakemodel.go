// Package fakemodel is what the fake model servers (agents/openaitest,
// agents/anthropictest) share: the script of replies with the record of
// requests, holding a response, and cutting text into streamed pieces.
package fakemodel

import (
	"io"
	"net/http"
	"sync"
)

// Script answers requests in arrival order: the oldest queued reply, else the
// handler's, else the server's default. It records every request. The zero
// value is ready; its methods are safe for concurrent use.
type Script[Req, Reply any] struct {
	mu       sync.Mutex
	queue    []Reply
	handler  func(Req) Reply
	requests []Req
}

// Enqueue appends replies to the queue; each request takes the oldest.
func (s *Script[Req, Reply]) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Handle sets the function that answers requests when the queue is empty. It is
// called without the script's lock held, possibly concurrently.
func (s *Script[Req, Reply]) Handle(fn func(Req) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = fn
}

// Requests returns a copy of every request received so far, in arrival order.
func (s *Script[Req, Reply]) Requests() []Req {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Req(nil), s.requests...)
}

// Forget drops the requests recorded so far, so a long load run (BenchmarkPlatform)
// does not count the fake's record as the process's memory.
func (s *Script[Req, Reply]) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Record records req, refused before any reply is taken for it.
func (s *Script[Req, Reply]) Record(req Req) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
}

// Next records req and returns its reply: the oldest queued one, else the
// handler's, else def's.
func (s *Script[Req, Reply]) Next(req Req, def func(Req) Reply) Reply {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	if len(s.queue) > 0 {
		reply := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return reply
	}
	handler := s.handler
	s.mu.Unlock()
	if handler != nil {
		return handler(req)
	}
	return def(req)
}

// WriteBody sends status with body as it is (text/html): a proxy's or web
// server's error page instead of the API's error JSON.
func WriteBody(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// Split cuts s into about n pieces on rune boundaries (none for "").
func Split(s string, n int) []string {
	if s == "" {
		return nil
	}
	runes := []rune(s)
	size := max(1, (len(runes)+n-1)/n)
	var out []string
	for len(runes) > 0 {
		k := min(size, len(runes))
		out = append(out, string(runes[:k]))
		runes = runes[k:]
	}
	return out
}
