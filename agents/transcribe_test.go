package agents

import (
	"context"
	"strings"
	"testing"

	"openbot/agents/openaitest"
)

func TestTranscriberPostsTheFileAndReturnsText(t *testing.T) {
	srv := openaitest.New(t)
	srv.SetTranscript("please restart the build")
	tr, err := NewTranscriber([]Provider{{BaseURL: srv.URL(), APIKey: "k"}}, "whisper-1", nil)
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
	if _, err := NewTranscriber([]Provider{{}}, " ", nil); err == nil {
		t.Error("an empty model must be refused")
	}
}
