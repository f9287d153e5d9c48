package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// maxVerifyErrors bounds how many problems Verify reports.
const maxVerifyErrors = 20

// Verify checks the file in one read transaction: bbolt's page consistency check,
// then every index against the records it is built from, both ways (queue,
// queue_thread, item_status and the queued counter against items; run_status against
// runs; outbox_pending against outbox; message_thread against messages; every run
// event listed once in run_event_log), and that run checkpoints live only in
// run_checkpoints, each with its run and valid JSON (schema version 8). It reads
// the whole file, so it is meant for `doctor` and tests, not the hot path. It returns
// nil or an error joining at most 20 problems.
func (s *Store) Verify(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	return s.db.View(func(tx *bbolt.Tx) error {
		v := verifier{tx: tx}
		for err := range tx.Check() {
			v.fail("bbolt check: %v", err)
		}
		v.items()
		v.runs()
		v.outbox()
		v.questions()
		v.messages()
		v.runEventLog()
		return errors.Join(v.errs...)
	})
}

type verifier struct {
	tx   *bbolt.Tx
	errs []error
}

func (v *verifier) fail(format string, args ...any) {
	if len(v.errs) < maxVerifyErrors {
		v.errs = append(v.errs, fmt.Errorf(format, args...))
	}
}

// compare reports keys of bucket name missing from want and extra keys in it.
func (v *verifier) compare(name []byte, want map[string]bool) {
	_ = v.tx.Bucket(name).ForEach(func(k, _ []byte) error {
		if !want[string(k)] {
			v.fail("%s: stale index entry %x", name, k)
		}
		delete(want, string(k))
		return nil
	})
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}) {
		v.fail("%s: missing index entry %x", name, k)
	}
}

func (v *verifier) items() {
	queue, queueThread, status := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var queued uint64
	_ = v.tx.Bucket(bktItems).ForEach(func(k, val []byte) error {
		var it core.InboxItem
		if err := json.Unmarshal(val, &it); err != nil {
			v.fail("item %x: decode: %v", k, err)
			return nil
		}
		if uint64(it.ID) != decodeU64(k) {
			v.fail("item under key %d has ID %d", decodeU64(k), it.ID)
		}
		if it.Status == core.ItemQueued {
			queued++
			queue[string(queueKey(it.Actor, it.ID))] = true
			queueThread[string(queueThreadKey(it.Actor, it.Thread, it.ID))] = true
		}
		if indexedItemStatus(it.Status) {
			status[string(statusKey(string(it.Status), uint64(it.ID)))] = true
		}
		return nil
	})
	v.compare(bktQueue, queue)
	v.compare(bktQueueThread, queueThread)
	v.compare(bktItemStatus, status)
	var counter uint64
	if c := v.tx.Bucket(bktMeta).Get(keyQueuedCount); c != nil {
		counter = decodeU64(c)
	}
	if counter != queued {
		v.fail("queued counter is %d, %d items are queued", counter, queued)
	}
}

func (v *verifier) runs() {
	want := map[string]bool{}
	_ = v.tx.Bucket(bktRuns).ForEach(func(k, val []byte) error {
		var r core.Run
		if err := json.Unmarshal(val, &r); err != nil {
			v.fail("run %x: decode: %v", k, err)
			return nil
		}
		if indexedRunStatus(r.Status) {
			want[string(statusKey(string(r.Status), uint64(r.ID)))] = true
		}
		if len(r.Checkpoint) > 0 {
			v.fail("run %d: runs record holds its checkpoint (the version 7 layout)", decodeU64(k))
		}
		return nil
	})
	v.compare(bktRunStatus, want)
	v.runCheckpoints()
}

func (v *verifier) outbox() {
	want := map[string]bool{}
	_ = v.tx.Bucket(bktOutbox).ForEach(func(k, val []byte) error {
		var o core.OutboxEntry
		if err := json.Unmarshal(val, &o); err != nil {
			v.fail("outbox %x: decode: %v", k, err)
			return nil
		}
		if o.Status == core.OutboxPending {
			want[string(k)] = true
		}
		return nil
	})
	v.compare(bktOutboxPending, want)
}

func (v *verifier) questions() {
	pending, tokens := map[string]bool{}, map[string]bool{}
	_ = v.tx.Bucket(bktQuestions).ForEach(func(k, val []byte) error {
		var q core.Question
		if err := json.Unmarshal(val, &q); err != nil {
			v.fail("question %x: decode: %v", k, err)
			return nil
		}
		if q.Status == core.QuestionPending {
			pending[string(k)] = true
		}
		tokens[q.Token] = true
		if got := v.tx.Bucket(bktQuestionTokens).Get([]byte(q.Token)); got == nil || string(got) != string(k) {
			v.fail("question_tokens: token %q does not point at question %x", q.Token, k)
		}
		return nil
	})
	v.compare(bktQuestionPending, pending)
	v.compare(bktQuestionTokens, tokens)
}

func (v *verifier) messages() {
	byID := v.tx.Bucket(bktMessageThread)
	n := 0
	_ = v.tx.Bucket(bktMessages).ForEach(func(k, _ []byte) error {
		n++
		if th := byID.Get(k[8:]); th == nil || decodeU64(th) != decodeU64(k[:8]) {
			v.fail("message %d of thread %d: message_thread entry is %x", decodeU64(k[8:]), decodeU64(k[:8]), th)
		}
		return nil
	})
	if m := byID.Stats().KeyN; m != n {
		v.fail("message_thread has %d entries, messages has %d", m, n)
	}
}
