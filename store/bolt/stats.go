package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// Stats is the size of the store and its oldest kept records, for `openbot
// doctor` (DESIGN.md §10 "retention").
type Stats struct {
	FileBytes int64
	// Records counts keys per pruned bucket: "messages", "run_events",
	// "activity", "outbox", "seen".
	Records map[string]int
	// Oldest kept record of each time-ordered kind; zero when there is none.
	OldestMessage  time.Time
	OldestRunEvent time.Time
	OldestActivity time.Time
	OldestOutbox   time.Time
}

// String renders the stats on one line.
func (s Stats) String() string {
	out := fmt.Sprintf("%.1f MiB; %d messages, %d run events, %d activity lines, %d outbox entries, %d dedup keys",
		float64(s.FileBytes)/(1<<20), s.Records["messages"], s.Records["run_events"], s.Records["activity"],
		s.Records["outbox"], s.Records["seen"])
	oldest := ""
	for _, o := range []struct {
		name string
		at   time.Time
	}{{"message", s.OldestMessage}, {"run event", s.OldestRunEvent}, {"activity", s.OldestActivity}, {"outbox", s.OldestOutbox}} {
		if !o.at.IsZero() {
			if oldest != "" {
				oldest += ", "
			}
			oldest += o.name + " " + o.at.UTC().Format(time.DateOnly)
		}
	}
	if oldest != "" {
		out += "; oldest kept: " + oldest
	}
	return out
}

// Stats reads the file size, record counts and oldest kept records in one read
// transaction. Counting walks each bucket's pages, so it is for `doctor`, not the
// hot path.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	if err := s.begin(ctx); err != nil {
		return Stats{}, err
	}
	out := Stats{Records: map[string]int{}}
	if fi, err := os.Stat(s.path); err == nil {
		out.FileBytes = fi.Size()
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		for name, b := range map[string][]byte{"messages": bktMessages, "run_events": bktRunEvents,
			"activity": bktActivity, "outbox": bktOutbox, "seen": bktSeen} {
			out.Records[name] = tx.Bucket(b).Stats().KeyN
		}
		// Message IDs grow with time: the lowest ID is the oldest message.
		if k, v := tx.Bucket(bktMessageThread).Cursor().First(); k != nil {
			var m core.Message
			if raw := tx.Bucket(bktMessages).Get(append(append([]byte{}, v...), k...)); raw != nil && json.Unmarshal(raw, &m) == nil {
				out.OldestMessage = m.Created
			}
		}
		out.OldestRunEvent = oldestAt(tx.Bucket(bktRunEvents), func(v []byte) time.Time {
			var e core.RunEvent
			_ = json.Unmarshal(v, &e)
			return e.At
		})
		out.OldestActivity = oldestAt(tx.Bucket(bktActivity), func(v []byte) time.Time {
			var a core.Activity
			_ = json.Unmarshal(v, &a)
			return a.At
		})
		out.OldestOutbox = oldestAt(tx.Bucket(bktOutbox), func(v []byte) time.Time {
			var o core.OutboxEntry
			_ = json.Unmarshal(v, &o)
			return o.Created
		})
		return nil
	})
	return out, err
}

// oldestAt decodes the time of the first record of an ID-ordered bucket.
func oldestAt(b *bbolt.Bucket, at func([]byte) time.Time) time.Time {
	if _, v := b.Cursor().First(); v != nil {
		return at(v)
	}
	return time.Time{}
}
