package agents

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"openbot/agents/openaitest"
)

func TestTranscriberPostsTheFileAndReturnsText(t *testing.T) {
	srv := openaitest.New(t)
	srv.SetTranscript("please restart the build")
	tr, err := NewTranscriber([]TranscribeProfile{{Name: "default", Provider: Provider{BaseURL: srv.URL(), APIKey: "k"}}}, "whisper-1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	text, err := tr(context.Background(), "voice.ogg", strings.NewReader("OggS-audio"))
	if err != nil || text != "please restart the build" {
		t.Fatalf("transcript %q, %v", text, err)
	}
	got := srv.Transcriptions()
	if len(got) != 1 || got[0].Model != "whisper-1" || got[0].FileName != "voice.ogg" || got[0].Content != "OggS-audio" {
		t.Errorf("requests = %+v", got)
	}
	if _, err := NewTranscriber([]TranscribeProfile{{}}, " ", nil, nil); err == nil {
		t.Error("an empty model must be refused")
	}
}

// TestTranscriberFallsBack: a profile answering 503 gives way to the next,
// and is skipped while it cools down.
func TestTranscriberFallsBack(t *testing.T) {
	var downCalls atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
	}))
	t.Cleanup(down.Close)
	up := openaitest.New(t)
	up.SetTranscript("from the backup")
	tr, err := NewTranscriber([]TranscribeProfile{{Name: "first", Provider: Provider{BaseURL: down.URL + "/v1", APIKey: "k"}},
		{Name: "second", Provider: Provider{BaseURL: up.URL(), APIKey: "k"}}}, "whisper-1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if text, err := tr(context.Background(), "v.ogg", strings.NewReader("OggS")); err != nil || text != "from the backup" {
			t.Fatalf("transcript %q, %v", text, err)
		}
	}
	if n, d := len(up.Transcriptions()), downCalls.Load(); n != 2 || d != 1 {
		t.Errorf("transcriptions: backup %d, first %d; want 2 and 1 (skipped while cooling down)", n, d)
	}
}
