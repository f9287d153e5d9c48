package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"openbot/store/bolt"
)

// storeStatsEvery bounds how often a scrape walks the store for its stats:
// counting walks each bucket's pages, so scrapes in between reuse the last read.
const storeStatsEvery = time.Minute

// storeStats exports the store's size, record counts and oldest kept records
// (DESIGN.md §10 retention: what the pruner keeps is visible in metrics as in
// `openbot doctor`). It reads bolt.Store.Stats at most once per storeStatsEvery,
// with a 5 s bound.
type storeStats struct {
	st  *bolt.Store
	log *slog.Logger

	mu   sync.Mutex
	at   time.Time
	last bolt.Stats

	size    *prometheus.Desc
	records *prometheus.Desc
	oldest  *prometheus.Desc
}

func registerStoreStats(reg *prometheus.Registry, st *bolt.Store, log *slog.Logger) {
	reg.MustRegister(&storeStats{st: st, log: log,
		size:    prometheus.NewDesc("openbot_store_file_bytes", "Size of the bbolt store file in bytes.", nil, nil),
		records: prometheus.NewDesc("openbot_store_records", "Records kept in the store, by kind.", []string{"kind"}, nil),
		oldest:  prometheus.NewDesc("openbot_store_oldest_record_timestamp_seconds", "Time of the oldest kept record, by kind (absent when there is none).", []string{"kind"}, nil),
	})
}

func (s *storeStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.size
	ch <- s.records
	ch <- s.oldest
}

func (s *storeStats) Collect(ch chan<- prometheus.Metric) {
	st, ok := s.read()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(s.size, prometheus.GaugeValue, float64(st.FileBytes))
	for kind, n := range st.Records {
		ch <- prometheus.MustNewConstMetric(s.records, prometheus.GaugeValue, float64(n), kind)
	}
	for kind, at := range map[string]time.Time{"message": st.OldestMessage, "run_event": st.OldestRunEvent, "activity": st.OldestActivity, "outbox": st.OldestOutbox} {
		if !at.IsZero() {
			ch <- prometheus.MustNewConstMetric(s.oldest, prometheus.GaugeValue, float64(at.Unix()), kind)
		}
	}
}

// read returns the cached stats, refreshed when older than storeStatsEvery.
func (s *storeStats) read() (bolt.Stats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && time.Since(s.at) < storeStatsEvery {
		return s.last, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.st.Stats(ctx)
	if err != nil {
		s.log.Warn("store stats for metrics", "err", err)
		return s.last, !s.at.IsZero()
	}
	s.at, s.last = time.Now(), st
	return st, true
}
