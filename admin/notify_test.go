package admin_test

import (
	"context"
	"testing"

	"openbot/admin"
	"openbot/core"
)

// A message committed while a speculation's reserved message ID is open stays
// behind it for the readers that follow message IDs (the event stream, the
// message index). When the reservation is released unused (the speculation
// missed), those readers can read the message: the release wakes them as a
// commit does. Without that they would see it only at the next commit, which
// on a quiet store may be much later (the message index waits for nothing else).
func TestNotifyWakesReadersWhenAReservationIsReleased(t *testing.T) {
	ctx := context.Background()
	n := admin.NewNotifier()
	st := admin.Notify(openStore(t), n)
	res := st.(core.IDReserver)
	var th core.Thread
	if err := st.Update(ctx, func(tx core.Tx) error {
		var err error
		th, err = tx.PutThread(core.Thread{Key: "k"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r, err := res.ReserveID(core.IDMessage)
	if err != nil {
		t.Fatal(err)
	}
	var m core.Message
	if err := st.Update(ctx, func(tx core.Tx) error {
		var err error
		m, err = tx.PutMessage(core.Message{Thread: th.ID, Sender: "u:1", Text: "hi"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	since := func() []core.Message {
		t.Helper()
		var ms []core.Message
		if err := st.View(ctx, func(tx core.ReadTx) error {
			var err error
			ms, err = tx.MessagesSince(0, 0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ms
	}
	// A reader woken by that commit reads nothing past the reservation, and
	// waits for the next hint.
	wait := n.Wait()
	if ms := since(); len(ms) != 0 {
		t.Fatalf("message %d read while %d is reserved: %v", m.ID, r, ms)
	}
	res.ReleaseIDs(core.IDMessage, r)
	select {
	case <-wait:
	default:
		t.Fatalf("releasing reservation %d woke no reader; message %d waits for the next commit", r, m.ID)
	}
	if ms := since(); len(ms) != 1 || ms[0].ID != m.ID {
		t.Fatalf("after the release: %v, want message %d", ms, m.ID)
	}
	// Releasing a reservation its transaction committed (an adopted
	// speculation's) ends nothing: nobody is woken for it.
	used, err := res.ReserveID(core.IDMessage)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx core.Tx) error {
		_, err := tx.PutMessage(core.Message{ID: core.MessageID(used), Thread: th.ID, Sender: "u:1", Text: "used"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wait = n.Wait()
	if ended := res.ReleaseIDs(core.IDMessage, used); ended != 0 {
		t.Fatalf("releasing committed reservation %d ended %d", used, ended)
	}
	select {
	case <-wait:
		t.Fatal("releasing a committed reservation woke the readers")
	default:
	}
}
