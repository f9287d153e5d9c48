package feishu_test

import (
	"context"
	"strings"
	"testing"

	"openbot/adapters/feishu"
	"openbot/core"
)

// heldEngine holds every Ingest whose Conversation contains hold until release
// is closed.
type heldEngine struct {
	feishu.Engine
	hold    string
	release chan struct{}
}

func (e *heldEngine) Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error) {
	if strings.Contains(string(in.Conversation), e.hold) {
		select {
		case <-e.release:
		case <-ctx.Done():
			return core.IngestResult{}, ctx.Err()
		}
	}
	return e.Engine.Ingest(ctx, in)
}

// TestLongConnectionChatsStoredConcurrently: while the ingest of a message in one
// chat is held, a message in another chat is stored and acked; the held one is
// acked only after its ingest returned.
func TestLongConnectionChatsStoredConcurrently(t *testing.T) {
	held := &heldEngine{hold: "oc_ca92fff76249e5680de3669b4880557c", release: make(chan struct{})}
	h := newHarness(t, func(o *feishu.Options) {
		o.Mode = feishu.ModeWebsocket
		o.EncryptKey = ""
		o.AllowUsers = nil
		o.DMPolicy = feishu.DMOpen
		held.Engine = o.Engine
		o.Engine = held
	})
	h.run()
	ctx := ctxT(t)
	if err := h.srv.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	slow, err := h.srv.PushEvent(ctx, compact(t, fixture(t, "event_v2_im_message_receive_p2p.json")), 1)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := h.srv.PushEvent(ctx, compact(t, fixture(t, "event_v2_im_message_receive_group_at_bot.json")), 1)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := h.srv.WaitAck(ctx, fast); err != nil || a.Code != 200 {
		t.Fatalf("the other chat's event waited for the held one: %+v %v", a, err)
	}
	for _, a := range h.srv.Acks() {
		if a.Frame.Header("message_id") == slow {
			t.Fatalf("held event acked before it was stored: %+v", a)
		}
	}
	close(held.release)
	if a, err := h.srv.WaitAck(ctx, slow); err != nil || a.Code != 200 {
		t.Fatalf("held event: %+v %v", a, err)
	}
	if n := len(h.eng.ins.Wait(t, 2)); n != 2 {
		t.Errorf("%d inbounds, want 2", n)
	}
}

// TestLongConnectionIngressReady: the account reports its ingress live only once
// the long connection is up (the /healthz readiness check).
func TestLongConnectionIngressReady(t *testing.T) {
	h := newHarness(t, func(o *feishu.Options) { o.Mode = feishu.ModeWebsocket; o.EncryptKey = "" })
	select {
	case <-h.a.IngressReady():
		t.Fatal("live before Run")
	default:
	}
	h.run()
	ctx := ctxT(t)
	if err := h.srv.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.a.IngressReady():
	case <-ctx.Done():
		t.Fatal("not live after the long connection came up")
	}
}
