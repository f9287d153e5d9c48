package config

import "cmp"

// Files configures attachments in both directions (DESIGN.md §4 ingest): the
// size caps of a person's files saved into the thread's workspace
// (inbox/<message>/<name>). A file over a cap is noted in the message, not saved.
type Files struct {
	// MaxFileBytes caps one file; default 20 MiB.
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxMessageBytes caps the files of one message together; default 50 MiB.
	MaxMessageBytes int64 `yaml:"max_message_bytes"`
	// MaxImageBytes caps an image sent to a vision model as a data URL (bots or
	// profiles with vision: true); larger images are described by their text
	// line only. Default 4 MiB.
	MaxImageBytes int64 `yaml:"max_image_bytes"`
	// MaxImageSide is the longest side, in pixels, of an image sent to a
	// vision model; a larger or heavier image is scaled down (aspect ratio
	// kept) and re-encoded before it is sent. Default 1568, at most 16384.
	MaxImageSide int `yaml:"max_image_side"`
	// Transcription turns voice notes and audio files into text appended to the
	// message (optional; off unless model is set).
	Transcription Transcription `yaml:"transcription"`
}

// Transcription names the OpenAI-compatible endpoint that transcribes audio:
// an llm profile (its base_url and api_key; default: the profile named
// "default", or the only one) and a model such as "whisper-1".
type Transcription struct {
	// LLM is a profile or a fallback chain of them (Chain).
	LLM   Chain  `yaml:"llm"`
	Model string `yaml:"model"`
}

// TranscriptionChain is the llm profiles transcription uses in order, or nil
// when it is off.
func (c *Config) TranscriptionChain() Chain {
	t := c.Files.Transcription
	if t.Model == "" {
		return nil
	}
	if t.LLM != nil { // written, even as []: validation reports an empty one
		return t.LLM
	}
	if _, ok := c.LLM["default"]; ok || len(c.LLM) != 1 {
		return Chain{"default"}
	}
	for name := range c.LLM {
		return Chain{name}
	}
	return nil
}

// Defaults of the files section.
const (
	DefaultMaxFileBytes    = 20 << 20
	DefaultMaxMessageBytes = 50 << 20
	DefaultMaxImageBytes   = 4 << 20
	DefaultMaxImageSide    = 1568
	maxImageSideLimit      = 16384
)

func (f *Files) applyDefaults() {
	f.MaxFileBytes = cmp.Or(f.MaxFileBytes, DefaultMaxFileBytes)
	f.MaxMessageBytes = cmp.Or(f.MaxMessageBytes, DefaultMaxMessageBytes)
	f.MaxImageBytes = cmp.Or(f.MaxImageBytes, DefaultMaxImageBytes)
	f.MaxImageSide = cmp.Or(f.MaxImageSide, DefaultMaxImageSide)
}

// validateFiles checks that the caps are positive and that one file fits the
// per-message cap.
func (c *Config) validateFiles(p *problems) {
	f := c.Files
	for _, v := range []struct {
		name string
		n    int64
	}{{"max_file_bytes", f.MaxFileBytes}, {"max_message_bytes", f.MaxMessageBytes}, {"max_image_bytes", f.MaxImageBytes}} {
		if v.n <= 0 {
			p.add("files."+v.name, "must be positive, got %d", v.n)
		}
	}
	if f.MaxImageSide <= 0 || f.MaxImageSide > maxImageSideLimit {
		p.add("files.max_image_side", "must be between 1 and %d pixels, got %d", maxImageSideLimit, f.MaxImageSide)
	}
	if f.Transcription.LLM != nil && f.Transcription.Model == "" {
		p.add("files.transcription.model", "must be set when files.transcription.llm is (for example whisper-1)")
	}
	if ch := c.TranscriptionChain(); ch != nil {
		c.validateChain(p, "files.transcription.llm", ch, false)
		for _, name := range ch {
			if prof, ok := c.LLM[name]; ok && !prof.OpenAICompatible() {
				p.add("files.transcription.llm", "%q is a provider %s profile, which has no transcription API; name an OpenAI-compatible profile", name, prof.Provider)
			}
		}
	}
	if f.MaxFileBytes > 0 && f.MaxMessageBytes > 0 && f.MaxFileBytes > f.MaxMessageBytes {
		p.add("files.max_file_bytes", "must not exceed files.max_message_bytes (%d), got %d", f.MaxMessageBytes, f.MaxFileBytes)
	}
}

// VisionFor reports whether bot b sends images to its model: the bot's own
// vision setting, else its LLM profile's.
func (c *Config) VisionFor(b Bot) bool {
	if b.Vision != nil {
		return *b.Vision
	}
	return c.LLM[b.LLM.First()].Vision
}
