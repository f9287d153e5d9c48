package config

import (
	"strings"
	"testing"
)

func TestFilesDefaultsAndValidation(t *testing.T) {
	var f Files
	f.applyDefaults()
	if f.MaxFileBytes != DefaultMaxFileBytes || f.MaxMessageBytes != DefaultMaxMessageBytes || f.MaxImageBytes != DefaultMaxImageBytes {
		t.Fatalf("defaults = %+v", f)
	}
	c := &Config{Files: Files{MaxFileBytes: 100, MaxMessageBytes: 10, MaxImageBytes: -1}}
	var p problems
	c.validateFiles(&p)
	err := p.err()
	if err == nil || !strings.Contains(err.Error(), "files.max_file_bytes") || !strings.Contains(err.Error(), "files.max_image_bytes") {
		t.Fatalf("err = %v, want both field paths", err)
	}
}

func TestTranscriptionProfile(t *testing.T) {
	c := &Config{LLM: map[string]LLMProfile{"local": {}}, Files: Files{MaxFileBytes: 1, MaxMessageBytes: 1, MaxImageBytes: 1}}
	if got := c.TranscriptionChain(); got != nil {
		t.Errorf("no model: profile %q, want none", got)
	}
	c.Files.Transcription.Model = "whisper-1"
	if got := c.TranscriptionChain().String(); got != "local" {
		t.Errorf("only profile: %q", got)
	}
	c.Files.Transcription.LLM = Chain{"missing"}
	var p problems
	c.validateFiles(&p)
	if err := p.err(); err == nil || !strings.Contains(err.Error(), "files.transcription.llm") {
		t.Errorf("err = %v", err)
	}
}

func TestFilesMaxImageSideDefaultAndBounds(t *testing.T) {
	var f Files
	f.applyDefaults()
	if f.MaxImageSide != DefaultMaxImageSide {
		t.Fatalf("default max_image_side = %d, want %d", f.MaxImageSide, DefaultMaxImageSide)
	}
	for _, side := range []int{-1, maxImageSideLimit + 1} {
		c := &Config{Files: Files{MaxFileBytes: 1, MaxMessageBytes: 1, MaxImageBytes: 1, MaxImageSide: side}}
		var p problems
		c.validateFiles(&p)
		if err := p.err(); err == nil || !strings.Contains(err.Error(), "files.max_image_side") {
			t.Errorf("side %d: err = %v, want files.max_image_side", side, err)
		}
	}
	c := &Config{Files: Files{MaxFileBytes: 1, MaxMessageBytes: 1, MaxImageBytes: 1, MaxImageSide: 800}}
	var p problems
	c.validateFiles(&p)
	if err := p.err(); err != nil {
		t.Errorf("side 800: %v", err)
	}
}
