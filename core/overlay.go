package core

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// overlay is a Tx that writes nothing: it answers reads from a read
// transaction with its own writes laid over them, kept in memory, and takes
// the IDs of the records it inserts from an IDReserver. A speculative ingest
// (core/speculate.go) runs the ingest's and the pick's own code on it, to know
// before the write transaction which run that transaction will start.
//
// It lays its writes over the reads the ingest and the pick make (records by
// ID, thread keys, dedup keys, a thread's newest messages and count, a
// mailbox's queued items, runs by status); any other read goes to the read
// transaction and may miss them, and any write outside the ingest's and the
// pick's fails with errNotSpeculated. Neither can make a wrong run: the write
// transaction adopts the speculative run only if it arrives at the same one.
//
// Records are kept as JSON, as the bolt store keeps them, so what a read
// returns compares equal with what the store returns for the same write.
type overlay struct {
	ReadTx
	res      IDReserver
	reserved map[IDKind][]uint64 // in the order the inserts asked for them

	actors   map[ActorID][]byte
	threads  map[ThreadID][]byte
	keys     map[string]ThreadID
	messages map[MessageID][]byte
	newMsgs  map[ThreadID][]MessageID // inserted messages per thread
	items    map[ItemID][]byte
	runs     map[RunID][]byte
	seen     map[string]MessageID
}

// errNotSpeculated refuses an overlay write that a speculative ingest does not
// lay over its reads: the speculation gives up.
var errNotSpeculated = errors.New("core: not speculated")

func newOverlay(tx ReadTx, res IDReserver) *overlay {
	return &overlay{ReadTx: tx, res: res, reserved: map[IDKind][]uint64{},
		actors: map[ActorID][]byte{}, threads: map[ThreadID][]byte{}, keys: map[string]ThreadID{},
		messages: map[MessageID][]byte{}, newMsgs: map[ThreadID][]MessageID{},
		items: map[ItemID][]byte{}, runs: map[RunID][]byte{}, seen: map[string]MessageID{}}
}

// release ends every reservation the overlay made.
func (o *overlay) release() {
	for k, ids := range o.reserved {
		o.res.ReleaseIDs(k, ids...)
	}
}

func (o *overlay) reserve(kind IDKind) (uint64, error) {
	id, err := o.res.ReserveID(kind)
	if err != nil {
		return 0, err
	}
	o.reserved[kind] = append(o.reserved[kind], id)
	return id, nil
}

func keep(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("core: overlay: encode %T: %v", v, err)) // core types always encode
	}
	return b
}

func load[T any](b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}

func (o *overlay) Actor(id ActorID) (Actor, error) {
	if b, ok := o.actors[id]; ok {
		return load[Actor](b)
	}
	return o.ReadTx.Actor(id)
}

func (o *overlay) Thread(id ThreadID) (Thread, error) {
	if b, ok := o.threads[id]; ok {
		return load[Thread](b)
	}
	return o.ReadTx.Thread(id)
}

func (o *overlay) ThreadByKey(key string) (ThreadID, error) {
	if id, ok := o.keys[key]; ok {
		return id, nil
	}
	return o.ReadTx.ThreadByKey(key)
}

func (o *overlay) Message(id MessageID) (Message, error) {
	if b, ok := o.messages[id]; ok {
		return load[Message](b)
	}
	return o.ReadTx.Message(id)
}

func (o *overlay) MessagesBefore(thread ThreadID, before MessageID, limit int) ([]Message, error) {
	ms, err := o.ReadTx.MessagesBefore(thread, before, limit)
	if err != nil {
		return nil, err
	}
	byID := map[MessageID]bool{}
	for i, m := range ms {
		byID[m.ID] = true
		if b, ok := o.messages[m.ID]; ok {
			if ms[i], err = load[Message](b); err != nil {
				return nil, err
			}
		}
	}
	for _, id := range o.newMsgs[thread] {
		if byID[id] || (before != 0 && id >= before) {
			continue
		}
		m, err := load[Message](o.messages[id])
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b Message) int { return cmp.Compare(b.ID, a.ID) })
	if limit > 0 && len(ms) > limit {
		ms = ms[:limit]
	}
	return orNil(ms), nil
}

// orNil returns an empty list as nil, as the store does.
func orNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func (o *overlay) CountMessages(thread ThreadID) (int, error) {
	n, err := o.ReadTx.CountMessages(thread)
	return n + len(o.newMsgs[thread]), err
}

func (o *overlay) Item(id ItemID) (InboxItem, error) {
	if b, ok := o.items[id]; ok {
		return load[InboxItem](b)
	}
	return o.ReadTx.Item(id)
}

// queued is the overlay's items queued in actor's mailbox (in thread, unless 0)
// that skip (nil: none) does not skip.
func (o *overlay) queued(actor ActorID, thread ThreadID, skip func(InboxItem) bool) ([]InboxItem, error) {
	var out []InboxItem
	for _, b := range o.items {
		it, err := load[InboxItem](b)
		if err != nil {
			return nil, err
		}
		if it.Actor == actor && it.Status == ItemQueued && (thread == 0 || it.Thread == thread) && (skip == nil || !skip(it)) {
			out = append(out, it)
		}
	}
	slices.SortFunc(out, func(a, b InboxItem) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func (o *overlay) NextQueued(actor ActorID, skip func(InboxItem) bool) (InboxItem, error) {
	under, err := o.ReadTx.NextQueued(actor, func(it InboxItem) bool {
		_, mine := o.items[it.ID] // the overlay's version decides
		return mine || skip(it)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return InboxItem{}, err
	}
	found := err == nil
	mine, err := o.queued(actor, 0, skip)
	if err != nil {
		return InboxItem{}, err
	}
	if len(mine) > 0 && (!found || mine[0].ID < under.ID) {
		return mine[0], nil
	}
	if !found {
		return InboxItem{}, fmt.Errorf("queued item of %s: %w", actor, ErrNotFound)
	}
	return under, nil
}

func (o *overlay) QueuedInThread(actor ActorID, thread ThreadID) ([]InboxItem, error) {
	its, err := o.ReadTx.QueuedInThread(actor, thread)
	if err != nil {
		return nil, err
	}
	its = slices.DeleteFunc(its, func(it InboxItem) bool { _, mine := o.items[it.ID]; return mine })
	mine, err := o.queued(actor, thread, nil)
	if err != nil {
		return nil, err
	}
	its = append(its, mine...)
	slices.SortFunc(its, func(a, b InboxItem) int { return cmp.Compare(a.ID, b.ID) })
	return orNil(its), nil
}

func (o *overlay) Run(id RunID) (Run, error) {
	if b, ok := o.runs[id]; ok {
		return load[Run](b)
	}
	return o.ReadTx.Run(id)
}

func (o *overlay) RunsByStatus(status RunStatus) ([]Run, error) {
	rs, err := o.ReadTx.RunsByStatus(status)
	if err != nil {
		return nil, err
	}
	rs = slices.DeleteFunc(rs, func(r Run) bool { _, mine := o.runs[r.ID]; return mine })
	for _, b := range o.runs {
		r, err := load[Run](b)
		if err != nil {
			return nil, err
		}
		if r.Status == status {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b Run) int { return cmp.Compare(a.ID, b.ID) })
	return orNil(rs), nil
}

func (o *overlay) Seen(key string) (MessageID, error) {
	if id, ok := o.seen[key]; ok {
		return id, nil
	}
	return o.ReadTx.Seen(key)
}

func (o *overlay) PutActor(a Actor) error {
	o.actors[a.ID] = keep(a)
	return nil
}

// assignID gives *id a reserved ID of kind when it is 0 and reports whether
// it did (an insert).
func assignID[T ~uint64](o *overlay, kind IDKind, id *T) (bool, error) {
	if *id != 0 {
		return false, nil
	}
	v, err := o.reserve(kind)
	*id = T(v)
	return err == nil, err
}

func (o *overlay) PutThread(t Thread) (Thread, error) {
	if _, err := assignID(o, IDThread, &t.ID); err != nil {
		return t, err
	}
	o.threads[t.ID] = keep(t)
	return t, nil
}

func (o *overlay) BindThreadKey(key string, id ThreadID) error {
	o.keys[key] = id
	return nil
}

func (o *overlay) PutMessage(m Message) (Message, error) {
	inserted, err := assignID(o, IDMessage, &m.ID)
	switch _, ok := o.messages[m.ID]; {
	case err != nil:
		return m, err
	case inserted:
		o.newMsgs[m.Thread] = append(o.newMsgs[m.Thread], m.ID)
	case !ok:
		return m, fmt.Errorf("update of message %d: %w", m.ID, errNotSpeculated)
	}
	o.messages[m.ID] = keep(m)
	return m, nil
}

func (o *overlay) PutItem(it InboxItem) (InboxItem, error) {
	if _, err := assignID(o, IDItem, &it.ID); err != nil {
		return it, err
	}
	o.items[it.ID] = keep(it)
	return it, nil
}

func (o *overlay) PutRun(r Run) (Run, error) {
	if _, err := assignID(o, IDRun, &r.ID); err != nil {
		return r, err
	}
	o.runs[r.ID] = keep(r)
	return r, nil
}

func (o *overlay) MarkSeen(key string, m MessageID) error {
	o.seen[key] = m
	return nil
}

// Writes a run does not read back: taken, not kept.

func (o *overlay) AppendRunEvent(e RunEvent) (RunEvent, error)     { return e, nil }
func (o *overlay) PutOutbox(e OutboxEntry) (OutboxEntry, error)    { return e, nil }
func (o *overlay) AppendActivity(Activity) error                   { return nil }
func (o *overlay) PutBot(BotProfile) error                         { return errNotSpeculated }
func (o *overlay) PutTodo(ActorID, ThreadID, []TodoItem) error     { return errNotSpeculated }
func (o *overlay) SetCursor(string, string) error                  { return errNotSpeculated }
func (o *overlay) PutQuestion(q Question) (Question, error)        { return q, errNotSpeculated }
func (o *overlay) PutMemory(m Memory) (Memory, error)              { return m, errNotSpeculated }
func (o *overlay) DeleteMemory(MemoryID) error                     { return errNotSpeculated }
func (o *overlay) PutMessageVector(MessageVector) error            { return errNotSpeculated }
func (o *overlay) PutLease(Lease) error                            { return errNotSpeculated }
func (o *overlay) DeleteLease(string) error                        { return errNotSpeculated }
func (o *overlay) DeletePendingReflection(uint64) error            { return errNotSpeculated }
func (o *overlay) PutUsage(e UsageEntry) (UsageEntry, bool, error) { return e, false, errNotSpeculated }
func (o *overlay) PutPendingReflection(p PendingReflection) (PendingReflection, error) {
	return p, errNotSpeculated
}

var _ Tx = (*overlay)(nil)
