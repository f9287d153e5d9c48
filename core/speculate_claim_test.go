package core

import "testing"

// A dedup key is claimed once; a second claim of it gets the channel its
// unclaim closes; past maxSpeculations a new key gets neither (it neither
// speculates nor waits).
func TestSpecStateClaim(t *testing.T) {
	var s specState
	for i := range maxSpeculations {
		if ok, ch := s.claim(string(rune('a' + i))); !ok || ch != nil {
			t.Fatalf("claim %d: %v, %v", i, ok, ch)
		}
	}
	ok, done := s.claim("a")
	if ok || done == nil {
		t.Fatalf("second claim of a key: %v, %v; want its channel", ok, done)
	}
	if ok, ch := s.claim("new"); ok || ch != nil {
		t.Fatalf("claim past the bound: %v, %v; want neither", ok, ch)
	}
	s.unclaim("a")
	select {
	case <-done:
	default:
		t.Fatal("unclaim did not close the channel")
	}
	if ok, _ := s.claim("new"); !ok {
		t.Fatal("a claim freed by unclaim was not given")
	}
}
