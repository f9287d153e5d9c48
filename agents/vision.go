package agents

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"openbot/core"
)

// DefaultMaxImageBytes caps one image sent as a data URL (Options.MaxImageBytes).
const DefaultMaxImageBytes = 4 << 20

// maxImagesPerRun bounds the image parts of one request.
const maxImagesPerRun = 8

// imageParts returns the image parts for a vision bot's request: the images
// attached to the run's trigger messages that were saved into the thread's
// workspace (Options.FilesDir), as data URLs, at most maxImagesPerRun. Each is
// fitted by fitImage to Options.MaxImageBytes and Options.MaxImageSide (scaled
// down and re-encoded when larger); an image that cannot be read, decoded or
// fitted becomes a text part saying so instead. Nil when the bot has no vision
// or nothing applies. Parts are built per request and never checkpointed.
func (r *run) imageParts() []openai.ChatMessagePart {
	if !r.job.Bot.Vision || r.agent.opts.FilesDir == nil {
		return nil
	}
	limit := r.agent.opts.MaxImageBytes
	if limit <= 0 {
		limit = DefaultMaxImageBytes
	}
	side := r.agent.opts.MaxImageSide
	if side <= 0 {
		side = DefaultMaxImageSide
	}
	var parts []openai.ChatMessagePart
	var ws *os.Root // the thread's workspace, opened for the first image
	var wsErr error
	defer func() {
		if ws != nil {
			ws.Close()
		}
	}()
	images := 0
	for _, m := range r.job.Triggers {
		for _, a := range m.Attachments {
			if !a.IsImage() || a.Path == "" || images >= maxImagesPerRun {
				continue
			}
			if ws == nil && wsErr == nil {
				ws, wsErr = core.OpenWorkspace(r.agent.opts.FilesDir(r.job.Thread.ID))
			}
			var url string
			err := wsErr
			if err == nil {
				url, err = dataURL(ws, a.Path, limit, side)
			}
			if err != nil {
				r.agent.log.Debug("image not sent to the model", "path", a.Path, "err", err)
				parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText,
					Text: fmt.Sprintf("[image %s not shown to you: %s]", a.Path, imageNote(err))})
				continue
			}
			images++
			parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL,
				ImageURL: &openai.ChatMessageImageURL{URL: url, Detail: openai.ImageURLDetailAuto}})
		}
	}
	return parts
}

// imageNote is the reason, in words for the model, that an image was left out.
func imageNote(err error) string {
	if errors.Is(err, errNotImage) {
		return "the file is not a readable PNG, JPEG, GIF or WebP image"
	}
	return "the image could not be read or made small enough"
}

// dataURL reads the image file name (slash-separated, relative to the thread's
// workspace ws; a regular file of at most maxImageFileBytes, opened with
// core.OpenSaved so no link is followed) and returns it as a data URL after
// fitImage(maxBytes, maxSide).
func dataURL(ws *os.Root, name string, maxBytes int64, maxSide int) (string, error) {
	f, st, err := core.OpenSaved(ws, name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if st.Size() > maxImageFileBytes {
		return "", fmt.Errorf("not a regular file of at most %d bytes", maxImageFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxImageFileBytes))
	if err != nil {
		return "", err
	}
	b, typ, err := fitImage(b, maxBytes, maxSide)
	if err != nil {
		return "", err
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
