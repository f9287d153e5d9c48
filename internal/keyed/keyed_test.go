package keyed

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestOrderWithinKeyConcurrencyAcross: the functions of one key run in
// submission order, and one key's held function does not hold another key's.
func TestOrderWithinKeyConcurrencyAcross(t *testing.T) {
	g := New(4)
	ctx := context.Background()
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	g.Go(ctx, "a", func() {
		<-release
		mu.Lock()
		order = append(order, "a1")
		mu.Unlock()
	})
	g.Go(ctx, "a", func() {
		mu.Lock()
		order = append(order, "a2")
		mu.Unlock()
	})
	bDone := make(chan struct{})
	g.Go(ctx, "b", func() { close(bDone) })
	<-bDone // b ran while a1 is held
	close(release)
	g.Wait()
	if !slices.Equal(order, []string{"a1", "a2"}) {
		t.Errorf("order in key a = %v, want [a1 a2]", order)
	}
}

// TestManyInOrderWithinKey: many functions of one key, submitted while other
// keys run too, each see all earlier ones of their key done.
func TestManyInOrderWithinKey(t *testing.T) {
	g := New(64)
	ctx := context.Background()
	var mu sync.Mutex
	next := map[string]int{}
	var bad []string
	for i := range 300 {
		key := []string{"a", "b", "c"}[i%3]
		n := i / 3
		g.Go(ctx, key, func() {
			mu.Lock()
			defer mu.Unlock()
			if next[key] != n {
				bad = append(bad, fmt.Sprintf("%s#%d ran when %d were done", key, n, next[key]))
			}
			next[key]++
		})
	}
	g.Wait()
	if len(bad) > 0 {
		t.Errorf("out of order within a key: %v", bad[:min(len(bad), 5)])
	}
}

// TestGoGivesUpWhenContextEnds: with every slot taken, Go returns false once
// ctx ends and does not run the function.
func TestGoGivesUpWhenContextEnds(t *testing.T) {
	g := New(1)
	release := make(chan struct{})
	g.Go(context.Background(), "a", func() { <-release })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	if g.Go(ctx, "b", func() { ran = true }) {
		t.Error("Go = true with no room and ctx done, want false")
	}
	close(release)
	g.Wait()
	if ran {
		t.Error("the refused function ran")
	}
}
