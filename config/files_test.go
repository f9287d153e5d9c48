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
