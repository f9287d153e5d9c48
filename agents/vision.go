package agents

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// DefaultMaxImageBytes caps one image sent as a data URL (Options.MaxImageBytes).
const DefaultMaxImageBytes = 4 << 20

// maxImagesPerRun bounds the image parts of one request.
const maxImagesPerRun = 8

// imageParts returns the image parts for a vision bot's request: the images
// attached to the run's trigger messages that were saved into the thread's
// workspace (Options.FilesDir), as data URLs, at most maxImagesPerRun and each
// at most Options.MaxImageBytes (larger ones keep only their text line). Nil
// when the bot has no vision or nothing applies. Images are not resized.
func (r *run) imageParts() []openai.ChatMessagePart {
	if !r.job.Bot.Vision || r.agent.opts.FilesDir == nil {
		return nil
	}
	limit := r.agent.opts.MaxImageBytes
	if limit <= 0 {
		limit = DefaultMaxImageBytes
	}
	dir := r.agent.opts.FilesDir(r.job.Thread.ID)
	var parts []openai.ChatMessagePart
	for _, m := range r.job.Triggers {
		for _, a := range m.Attachments {
			if !a.IsImage() || a.Path == "" || len(parts) >= maxImagesPerRun {
				continue
			}
			url, err := dataURL(filepath.Join(dir, filepath.FromSlash(a.Path)), limit)
			if err != nil {
				r.agent.log.Debug("image not sent to the model", "path", a.Path, "err", err)
				continue
			}
			parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL,
				ImageURL: &openai.ChatMessageImageURL{URL: url, Detail: openai.ImageURLDetailAuto}})
		}
	}
	return parts
}

// dataURL reads an image file of at most limit bytes as a data URL; the type
// is sniffed from the content, and only PNG, JPEG, GIF and WebP are accepted.
func dataURL(path string, limit int64) (string, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || st.Size() > limit {
		return "", fmt.Errorf("not a regular file of at most %d bytes", limit)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	typ := http.DetectContentType(b)
	switch typ {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
	default:
		return "", fmt.Errorf("content is %s, not an image a model reads", typ)
	}
	return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(b), nil
}

// withImages returns msgs with the image parts added to the last user message
// of the prompt (index last), as multi-part content; msgs itself is not changed.
func withImages(msgs []openai.ChatCompletionMessage, last int, parts []openai.ChatMessagePart) []openai.ChatCompletionMessage {
	if len(parts) == 0 || last < 0 || last >= len(msgs) || msgs[last].Role != openai.ChatMessageRoleUser {
		return msgs
	}
	out := append([]openai.ChatCompletionMessage(nil), msgs...)
	m := out[last]
	text := strings.TrimSpace(m.Content)
	m.MultiContent = append([]openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: text}}, parts...)
	m.Content = ""
	out[last] = m
	return out
}

// images is imageParts, read once per run.
func (r *run) images() []openai.ChatMessagePart {
	r.imgsOnce.Do(func() { r.imgs = r.imageParts() })
	return r.imgs
}
