package feishu

import (
	"bytes"
	"encoding/hex"
	"testing"
)

type wsFrames struct {
	ServiceID int32 `json:"service_id_from_url"`
	Frames    []struct {
		Name    string
		Hex     string
		Decoded struct {
			SeqID    uint64
			LogID    uint64
			Service  int32 `json:"service"`
			Method   int32 `json:"method"`
			Headers  []struct{ Key, Value string }
			Payload  *string `json:"payload_utf8"`
			LogIDNew string
		}
	}
	Reassembled string `json:"reassembled_fragment_payload"`
}

func loadFrames(t *testing.T) wsFrames {
	var f wsFrames
	readJSON(t, "ws_frames.json", &f)
	return f
}

// TestFrameVectors decodes every fixture frame and re-encodes it byte for byte.
func TestFrameVectors(t *testing.T) {
	f := loadFrames(t)
	if len(f.Frames) < 8 {
		t.Fatalf("only %d frames", len(f.Frames))
	}
	for _, v := range f.Frames {
		t.Run(v.Name, func(t *testing.T) {
			raw, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			fr, err := UnmarshalFrame(raw)
			if err != nil {
				t.Fatal(err)
			}
			d := v.Decoded
			if fr.SeqID != d.SeqID || fr.LogID != d.LogID || fr.Service != d.Service || fr.Method != d.Method || fr.LogIDNew != d.LogIDNew {
				t.Errorf("decoded %+v, want %+v", fr, d)
			}
			if len(fr.Headers) != len(d.Headers) {
				t.Fatalf("headers %v, want %v", fr.Headers, d.Headers)
			}
			for i, h := range d.Headers {
				if fr.Headers[i] != (Header{h.Key, h.Value}) {
					t.Errorf("header %d = %v, want %v", i, fr.Headers[i], h)
				}
			}
			if (d.Payload == nil) != (fr.Payload == nil) || (d.Payload != nil && string(fr.Payload) != *d.Payload) {
				t.Errorf("payload %q, want %v", fr.Payload, d.Payload)
			}
			if got := fr.Marshal(); !bytes.Equal(got, raw) {
				t.Errorf("Marshal =\n%x\nwant\n%x", got, raw)
			}
		})
	}
}

func TestPingAndAckBytes(t *testing.T) {
	f := loadFrames(t)
	byName := map[string][]byte{}
	for _, v := range f.Frames {
		byName[v.Name], _ = hex.DecodeString(v.Hex)
	}
	if got := pingFrame(f.ServiceID).Marshal(); !bytes.Equal(got, byName["client_ping"]) {
		t.Errorf("ping =\n%x\nwant\n%x", got, byName["client_ping"])
	}
	ev, _ := UnmarshalFrame(byName["server_event_p2p"])
	if got := ackFrame(ev, 200, nil, 12).Marshal(); !bytes.Equal(got, byName["client_ack_event"]) {
		t.Errorf("ack =\n%x\nwant\n%x", got, byName["client_ack_event"])
	}
	last, _ := UnmarshalFrame(byName["server_fragment_1_of_2"])
	if got := ackFrame(last, 200, nil, 9).Marshal(); !bytes.Equal(got, byName["client_ack_after_reassembly"]) {
		t.Errorf("reassembly ack =\n%x\nwant\n%x", got, byName["client_ack_after_reassembly"])
	}
}

func TestUnmarshalFrameRejects(t *testing.T) {
	for _, b := range [][]byte{{0x08}, {0x2a, 0x05, 0x0a}, {0x42, 0x10, 'x'}} {
		if _, err := UnmarshalFrame(b); err == nil {
			t.Errorf("UnmarshalFrame(%x) succeeded", b)
		}
	}
}
