package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"openbot/core"
)

// BenchmarkIngestDuringPrune measures what pruning costs ingestion (DESIGN.md
// §10 "retention": the pruner must never stall ingest). The store (fsync on)
// holds 100,000 old records (50,000 activity lines, 50,000 run events of
// finished runs); one goroutine ingests (one Batch per message: the message, its
// dedup key and an activity line, as core.Ingest writes) while core.Pruner.Pass
// deletes all 100,000, then the same number of ingests run with no pruning. It
// reports the p50 and p99 ingest latency of both phases and their ratio (the
// budget is 2x). Run it with -benchtime=1x.
func BenchmarkIngestDuringPrune(b *testing.B) {
	for range b.N {
		benchIngestDuringPrune(b)
	}
}

func benchIngestDuringPrune(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "openbot.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	old := pruneNow.Add(-1000 * time.Hour)
	const records, perTx = 100_000, 5_000
	for i := 0; i < records/2; i += perTx {
		err := s.Update(ctx, func(tx core.Tx) error {
			for range perTx / 50 {
				r, err := tx.PutRun(core.Run{Thread: 1, Bot: "bot:a", Status: core.RunCompleted, Created: old, Ended: old})
				if err != nil {
					return err
				}
				for range 50 {
					if _, err := tx.AppendRunEvent(core.RunEvent{Run: r.ID, Type: "model_call", At: old}); err != nil {
						return err
					}
				}
			}
			for range perTx {
				if err := tx.AppendActivity(core.Activity{Event: "run_done", Summary: "a run finished after three steps", At: old}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	var th core.Thread
	if err := s.Update(ctx, func(tx core.Tx) error { th, err = tx.PutThread(core.Thread{Created: pruneNow}); return err }); err != nil {
		b.Fatal(err)
	}
	seq := 0
	ingest := func() time.Duration {
		seq++
		start := time.Now()
		err := s.Batch(ctx, func(tx core.Tx) error {
			m, err := tx.PutMessage(core.Message{Thread: th.ID, Sender: "telegram:1", Text: "hello there", Created: pruneNow})
			if err != nil {
				return err
			}
			if err := tx.MarkSeen(fmt.Sprintf("telegram:1:%d", seq), m.ID); err != nil {
				return err
			}
			return tx.AppendActivity(core.Activity{Event: "ingest", Summary: "message", Message: m.ID, At: pruneNow})
		})
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	p, err := core.NewPruner(core.PrunerOptions{Store: s, Clock: fixedClock{pruneNow},
		Retention: core.Retention{RunEvents: 48 * time.Hour, Activity: 48 * time.Hour}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	done := make(chan map[core.PruneKind]int, 1)
	go func() {
		n, err := p.Pass(ctx)
		if err != nil {
			b.Error(err)
		}
		done <- n
	}()
	var during []time.Duration
	var pruned map[core.PruneKind]int
	for pruned == nil {
		during = append(during, ingest())
		select {
		case pruned = <-done:
		default:
		}
	}
	if got := pruned[core.PruneRunEvents] + pruned[core.PruneActivity]; got != records {
		b.Fatalf("pruned %d records, want %d", got, records)
	}
	quiet := make([]time.Duration, 0, len(during))
	for range len(during) {
		quiet = append(quiet, ingest())
	}
	b.StopTimer()
	pct := func(d []time.Duration, q float64) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[int(q*float64(len(d)-1))].Microseconds())
	}
	b.ReportMetric(float64(len(during)), "ingests")
	b.ReportMetric(pct(quiet, 0.5), "p50-quiet-µs")
	b.ReportMetric(pct(during, 0.5), "p50-pruning-µs")
	b.ReportMetric(pct(quiet, 0.99), "p99-quiet-µs")
	b.ReportMetric(pct(during, 0.99), "p99-pruning-µs")
	b.ReportMetric(pct(during, 0.5)/pct(quiet, 0.5), "p50-ratio")
	b.ReportMetric(pct(during, 0.99)/pct(quiet, 0.99), "p99-ratio")
}
