package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"go.etcd.io/bbolt"

	"openbot/core"
)

// SchemaVersion is the layout this binary writes. Open upgrades older files through
// migrations() and refuses newer ones.
//
// Layout of version 1 (every bucket top-level; "BE" is big-endian uint64; records
// are JSON of the core type; index values are empty unless stated):
//
//	meta            "schema_version" -> BE; "queued_count" -> BE (queued items, all mailboxes);
//	                "prune_seen_after", "prune_idle_after" -> where the last prune walk
//	                stopped (prune.go; absent = start over), no migration needed
//	actors          ActorID -> core.Actor
//	bots            handle -> core.BotProfile
//	threads         ThreadID BE -> core.Thread                  (NextSequence: thread IDs)
//	thread_keys     platform thread key -> ThreadID BE
//	messages        ThreadID BE + MessageID BE -> core.Message  (NextSequence: message IDs)
//	message_thread  MessageID BE -> ThreadID BE                 (lookup by ID)
//	items           ItemID BE -> core.InboxItem                 (NextSequence: item IDs)
//	queue           ActorID 0x00 ItemID BE                       queued items per mailbox
//	queue_thread    ActorID 0x00 ThreadID BE ItemID BE           queued items per (mailbox, thread)
//	item_status     status 0x00 ItemID BE                        queued and processing items
//	runs            RunID BE -> core.Run                        (NextSequence: run IDs)
//	run_status      status 0x00 RunID BE                         queued, running, waiting_human runs
//	run_events      RunID BE + Seq BE -> core.RunEvent
//	outbox          OutboxID BE -> core.OutboxEntry             (NextSequence: outbox IDs)
//	outbox_pending  OutboxID BE                                  pending entries
//	seen            dedup key -> MessageID BE
//	todos           ActorID 0x00 ThreadID BE -> []core.TodoItem
//	activity        Seq BE -> core.Activity                     (NextSequence: Seq)
//	cursors         name -> value
//
// Version 2 adds the questions of paused runs (DESIGN.md §5):
//
//	questions        QuestionID BE -> core.Question             (NextSequence: question IDs)
//	question_tokens  Token -> QuestionID BE                      button payload lookup
//	question_pending QuestionID BE                               pending questions
//
// Version 3 adds the store-wide order of run events, the cursor of the operator
// console's live event stream (DESIGN.md §10):
//
//	run_event_log    Pos BE -> RunID BE + Seq BE               (NextSequence: Pos)
//
// Version 4 adds the usage ledger of cost control, one entry per model call,
// idempotent per (run, call), and the running totals budgets read:
//
//	usage            Seq BE -> core.UsageEntry                  (NextSequence: Seq)
//	usage_keys       idempotency key -> Seq BE
//	usage_totals     scope (core.UsageEntry.Scopes) -> core.UsageTotal
//
// The "budget.warned:<scope>" cursors mark a budget's warning as posted.
//
// Version 5 adds the bots' memories and the pending reflections (seed §9, G7):
//
//	memories         MemoryID BE -> core.Memory                (NextSequence: memory IDs)
//	memory_bot       handle 0x00 MemoryID BE                    memories per bot
//	reflections      Seq BE -> core.PendingReflection          (NextSequence: Seq)
//
// Version 6 adds the semantic index of messages (seed §9), filled in the
// background after ingest:
//
//	message_vectors  ThreadID BE + MessageID BE -> core.MessageVector
//
// Version 7 adds the leases of processes sharing a store (core/lease.go):
//
//	leases           key -> core.Lease
//
// Version 8 moves each run's checkpoint (core.Run.Checkpoint, the agent's
// transcript) out of its runs record, which from then on is the run without
// it, so the status and usage updates of a run neither decode nor re-encode the
// transcript (checkpoint.go):
//
//	run_checkpoints  RunID BE -> the checkpoint's bytes          runs with a checkpoint
//
// CountQueued reads the "queued_count" counter, kept in the same transaction as the
// queue index, so it costs O(1) rather than a walk of the queue.
const SchemaVersion = 8

var (
	bktMeta          = []byte("meta")
	bktActors        = []byte("actors")
	bktBots          = []byte("bots")
	bktThreads       = []byte("threads")
	bktThreadKeys    = []byte("thread_keys")
	bktMessages      = []byte("messages")
	bktMessageThread = []byte("message_thread")
	bktItems         = []byte("items")
	bktQueue         = []byte("queue")
	bktQueueThread   = []byte("queue_thread")
	bktItemStatus    = []byte("item_status")
	bktRuns          = []byte("runs")
	bktRunStatus     = []byte("run_status")
	bktRunEvents     = []byte("run_events")
	bktOutbox        = []byte("outbox")
	bktOutboxPending = []byte("outbox_pending")
	bktSeen          = []byte("seen")
	bktTodos         = []byte("todos")
	bktActivity      = []byte("activity")
	bktCursors       = []byte("cursors")

	bktQuestions       = []byte("questions")
	bktQuestionTokens  = []byte("question_tokens")
	bktQuestionPending = []byte("question_pending")

	bktRunEventLog = []byte("run_event_log")

	bktUsage       = []byte("usage")
	bktUsageKeys   = []byte("usage_keys")
	bktUsageTotals = []byte("usage_totals")

	bktMemories    = []byte("memories")
	bktMemoryBot   = []byte("memory_bot")
	bktReflections = []byte("reflections")

	bktMessageVectors = []byte("message_vectors")
	// leases: key -> JSON core.Lease (version 7, core/lease.go)
	bktLeases = []byte("leases")
	// run_checkpoints: RunID BE -> the run's checkpoint (version 8, checkpoint.go)
	bktRunCheckpoints = []byte("run_checkpoints")

	keyVersion     = []byte("schema_version")
	keyQueuedCount = []byte("queued_count")
)

// allBuckets is every bucket of the current layout.
func allBuckets() [][]byte {
	return [][]byte{
		bktMeta, bktActors, bktBots, bktThreads, bktThreadKeys, bktMessages,
		bktMessageThread, bktItems, bktQueue, bktQueueThread, bktItemStatus, bktRuns,
		bktRunStatus, bktRunEvents, bktOutbox, bktOutboxPending, bktSeen, bktTodos,
		bktActivity, bktCursors, bktQuestions, bktQuestionTokens, bktQuestionPending,
		bktRunEventLog, bktUsage, bktUsageKeys, bktUsageTotals,
		bktMemories, bktMemoryBot, bktReflections, bktMessageVectors, bktLeases,
		bktRunCheckpoints,
	}
}

// migration upgrades a file from version from to from+1 inside the open transaction.
type migration struct {
	from int
	desc string
	fn   func(tx *bbolt.Tx) error
}

// migrations is the ordered upgrade path; migrations()[i] upgrades version i to i+1,
// so len(migrations()) == SchemaVersion.
func migrations() []migration {
	return []migration{
		{from: 0, desc: "add meta bucket, item_status index and queued counter", fn: migrate0to1},
		{from: 1, desc: "add questions, question_tokens and question_pending buckets", fn: migrate1to2},
		{from: 2, desc: "add run_event_log, the store-wide order of run events", fn: migrate2to3},
		{from: 3, desc: "add the usage ledger: usage, usage_keys and usage_totals", fn: migrate3to4},
		{from: 4, desc: "add bot memory: memories, memory_bot and reflections", fn: migrate4to5},
		{from: 5, desc: "add message_vectors, the semantic index of messages", fn: migrate5to6},
		{from: 6, desc: "add leases, the claims of processes sharing a store", fn: migrate6to7},
		{from: 7, desc: "move run checkpoints out of the run records into run_checkpoints", fn: migrate7to8},
	}
}

// migrate6to7 adds the lease bucket; version 6 files hold no leases.
func migrate6to7(tx *bbolt.Tx) error {
	_, err := tx.CreateBucketIfNotExists(bktLeases)
	return err
}

// migrate5to6 adds the message vector bucket; version 5 files have no vectors
// (the indexer embeds their messages in the background).
func migrate5to6(tx *bbolt.Tx) error {
	_, err := tx.CreateBucketIfNotExists(bktMessageVectors)
	return err
}

// migrate4to5 adds the memory buckets; version 4 files have no memories.
func migrate4to5(tx *bbolt.Tx) error {
	for _, b := range [][]byte{bktMemories, bktMemoryBot, bktReflections} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}

// migrate3to4 adds the ledger buckets; version 3 files have no ledger.
func migrate3to4(tx *bbolt.Tx) error {
	for _, b := range [][]byte{bktUsage, bktUsageKeys, bktUsageTotals} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}

// migrate2to3 builds run_event_log from the stored run events, in key order
// (run, then Seq), so events of earlier versions can be replayed too.
func migrate2to3(tx *bbolt.Tx) error {
	log, err := tx.CreateBucketIfNotExists(bktRunEventLog)
	if err != nil {
		return err
	}
	events := tx.Bucket(bktRunEvents)
	if events == nil {
		return errors.New("version 2 file without run_events bucket")
	}
	return events.ForEach(func(k, _ []byte) error {
		pos, err := log.NextSequence()
		if err != nil {
			return err
		}
		return log.Put(u64(pos), append([]byte(nil), k...))
	})
}

// migrate1to2 adds the question buckets; version 1 files have no questions.
func migrate1to2(tx *bbolt.Tx) error {
	for _, b := range [][]byte{bktQuestions, bktQuestionTokens, bktQuestionPending} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}

// migrate0to1 builds the item_status index and the queued counter from the items.
func migrate0to1(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bktMeta); err != nil {
		return err
	}
	idx, err := tx.CreateBucketIfNotExists(bktItemStatus)
	if err != nil {
		return err
	}
	items := tx.Bucket(bktItems)
	if items == nil {
		return errors.New("version 0 file without items bucket")
	}
	var queued uint64
	err = items.ForEach(func(k, v []byte) error {
		var it core.InboxItem
		if err := json.Unmarshal(v, &it); err != nil {
			return fmt.Errorf("item %x: %w", k, err)
		}
		if !indexedItemStatus(it.Status) {
			return nil
		}
		if it.Status == core.ItemQueued {
			queued++
		}
		return idx.Put(statusKey(string(it.Status), uint64(it.ID)), nil)
	})
	if err != nil {
		return err
	}
	return tx.Bucket(bktMeta).Put(keyQueuedCount, u64(queued))
}

// upgrade creates or upgrades the layout in one transaction and returns the version
// the file had before (SchemaVersion for a new file).
func upgrade(db *bbolt.DB, log *slog.Logger) (int, error) {
	from := SchemaVersion
	err := db.Update(func(tx *bbolt.Tx) error {
		version, fresh, err := fileVersion(tx)
		if err != nil {
			return err
		}
		from = version
		if version > SchemaVersion {
			return fmt.Errorf("%w: file has schema version %d, this binary knows up to %d", ErrNewerSchema, version, SchemaVersion)
		}
		if !fresh {
			for _, m := range migrations()[version:] {
				log.Info("store migration", "from", m.from, "to", m.from+1, "what", m.desc)
				if err := m.fn(tx); err != nil {
					return fmt.Errorf("migrate schema %d to %d: %w", m.from, m.from+1, err)
				}
			}
		}
		for _, name := range allBuckets() {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return tx.Bucket(bktMeta).Put(keyVersion, u64(SchemaVersion))
	})
	return from, err
}

// fileVersion reads the schema version: the meta key if present, 0 for a version 0
// file (items bucket, no meta), and SchemaVersion with fresh=true for an empty file.
func fileVersion(tx *bbolt.Tx) (version int, fresh bool, err error) {
	if meta := tx.Bucket(bktMeta); meta != nil {
		v := meta.Get(keyVersion)
		if len(v) != 8 {
			return 0, false, fmt.Errorf("meta bucket without a valid schema version (%d bytes)", len(v))
		}
		return int(binary.BigEndian.Uint64(v)), false, nil
	}
	if tx.Bucket(bktItems) != nil {
		return 0, false, nil
	}
	return SchemaVersion, true, nil
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func decodeU64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// prefixKey is s 0x00 (the separator of string-led composite keys).
func prefixKey(s string) []byte {
	b := make([]byte, 0, len(s)+1+16)
	b = append(b, s...)
	return append(b, 0)
}

// statusKey is status 0x00 id BE, for item_status and run_status.
func statusKey(status string, id uint64) []byte {
	return binary.BigEndian.AppendUint64(prefixKey(status), id)
}

func queueKey(actor core.ActorID, item core.ItemID) []byte {
	return binary.BigEndian.AppendUint64(prefixKey(string(actor)), uint64(item))
}

func queueThreadPrefix(actor core.ActorID, thread core.ThreadID) []byte {
	return binary.BigEndian.AppendUint64(prefixKey(string(actor)), uint64(thread))
}

func queueThreadKey(actor core.ActorID, thread core.ThreadID, item core.ItemID) []byte {
	return binary.BigEndian.AppendUint64(queueThreadPrefix(actor, thread), uint64(item))
}

func pairKey(a, b uint64) []byte {
	return binary.BigEndian.AppendUint64(u64(a), b)
}

func todoKey(bot core.ActorID, thread core.ThreadID) []byte {
	return binary.BigEndian.AppendUint64(prefixKey(string(bot)), uint64(thread))
}

func indexedItemStatus(s core.ItemStatus) bool {
	return s == core.ItemQueued || s == core.ItemProcessing
}

func indexedRunStatus(s core.RunStatus) bool {
	return s == core.RunQueued || s == core.RunRunning || s == core.RunWaitingHuman
}
