package agents

import (
	"bytes"
	"encoding/base64"
	"image"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"openbot/core"

	openai "github.com/sashabaranov/go-openai"
)

// TestImagePartsResizesAndNotes checks a vision run's image parts: a large
// image arrives scaled down within the configured side, a small one unchanged,
// and a corrupt one as a text note naming its path instead of an image.
func TestImagePartsResizesAndNotes(t *testing.T) {
	dir := t.TempDir()
	small := encodePNG(t, noisy(16, 16, false))
	files := map[string][]byte{
		"inbox/1/big.png":   encodePNG(t, noisy(400, 200, false)),
		"inbox/1/small.png": small,
		"inbox/1/bad.png":   []byte("\x89PNG\r\n\x1a\n garbage"),
	}
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := &Agent{opts: Options{FilesDir: func(core.ThreadID) string { return dir }, MaxImageSide: 100},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	att := func(p string) core.Attachment {
		return core.Attachment{Name: filepath.Base(p), Type: "image/png", Path: p}
	}
	r := &run{agent: a, job: &core.Job{Bot: core.BotProfile{Vision: true}, Triggers: []core.Message{{
		Attachments: []core.Attachment{att("inbox/1/big.png"), att("inbox/1/small.png"), att("inbox/1/bad.png")}}}}}

	parts := r.imageParts()
	if len(parts) != 3 {
		t.Fatalf("parts = %d, want 3", len(parts))
	}
	decode := func(p openai.ChatMessagePart) ([]byte, image.Image) {
		t.Helper()
		if p.Type != openai.ChatMessagePartTypeImageURL {
			t.Fatalf("part type %s, want image_url", p.Type)
		}
		_, enc, _ := strings.Cut(p.ImageURL.URL, ";base64,")
		b, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			t.Fatal(err)
		}
		img, _, err := image.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("image part does not decode: %v", err)
		}
		return b, img
	}
	if _, img := decode(parts[0]); img.Bounds().Dx() != 100 || img.Bounds().Dy() != 50 {
		t.Errorf("big image sent as %v, want 100x50", img.Bounds())
	}
	if !strings.HasPrefix(parts[0].ImageURL.URL, "data:image/jpeg;base64,") {
		t.Errorf("big image URL %.30q, want a JPEG data URL", parts[0].ImageURL.URL)
	}
	if b, _ := decode(parts[1]); !bytes.Equal(b, small) {
		t.Error("small image was changed")
	}
	if parts[2].Type != openai.ChatMessagePartTypeText || !strings.Contains(parts[2].Text, "inbox/1/bad.png") {
		t.Errorf("corrupt image part = %+v, want a text note naming it", parts[2])
	}
}

// TestImagePartsFollowNoLinkOut: an image whose inbox directory a sandboxed
// command replaced with a symbolic link to a directory outside the workspace
// is not read (a text note instead), so no host image reaches the model.
func TestImagePartsFollowNoLinkOut(t *testing.T) {
	base := t.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(ws, "inbox"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.png"), encodePNG(t, noisy(8, 8, false)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "inbox", "1")); err != nil {
		t.Fatal(err)
	}
	a := &Agent{opts: Options{FilesDir: func(core.ThreadID) string { return ws }},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r := &run{agent: a, job: &core.Job{Bot: core.BotProfile{Vision: true}, Triggers: []core.Message{{
		Attachments: []core.Attachment{{Name: "secret.png", Type: "image/png", Path: "inbox/1/secret.png"}}}}}}
	parts := r.imageParts()
	if len(parts) != 1 || parts[0].Type != openai.ChatMessagePartTypeText || !strings.Contains(parts[0].Text, "not shown") {
		t.Fatalf("parts = %+v, want one text note", parts)
	}
}
