package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/core"
)

// Files in both directions (DESIGN.md §4 ingest): a person's photo, document,
// voice note, audio or video becomes a core.Attachment whose Ref is the Bot
// API file_id; FetchFile resolves it with getFile and downloads the file URL.
// A bot's file goes out with sendPhoto (images) or sendDocument into the right
// topic, replying to the message the run answers.

// fileMeta is the part of the Bot API PhotoSize, Document, Voice, Audio and
// Video objects openbot reads.
type fileMeta struct {
	FileID   string `json:"file_id"`
	FileName string `json:"file_name,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
	FileSize int64  `json:"file_size,omitempty"`
	Width    int    `json:"width,omitempty"`
}

// attachmentsOf lists a message's files: the largest photo size, the document,
// voice note, audio and video.
func attachmentsOf(m *message) []core.Attachment {
	var out []core.Attachment
	if n := len(m.Photo); n > 0 {
		best := m.Photo[0]
		for _, p := range m.Photo[1:] {
			if p.FileSize > best.FileSize || (p.FileSize == best.FileSize && p.Width > best.Width) {
				best = p
			}
		}
		out = append(out, core.Attachment{Name: "photo-" + strconv.FormatInt(m.MessageID, 10) + ".jpg",
			Type: "image/jpeg", Kind: "image", Size: best.FileSize, Ref: best.FileID})
	}
	add := func(f *fileMeta, kind, ext string) {
		if f == nil || f.FileID == "" {
			return
		}
		name := f.FileName
		if name == "" {
			name = kind + "-" + strconv.FormatInt(m.MessageID, 10) + ext
		}
		if kind == "document" && strings.HasPrefix(f.MimeType, "image/") {
			kind = "image"
		}
		out = append(out, core.Attachment{Name: name, Type: f.MimeType, Kind: kind, Size: f.FileSize, Ref: f.FileID})
	}
	add(m.Document, "document", "")
	add(m.Voice, "voice", ".ogg")
	add(m.Audio, "audio", ".mp3")
	add(m.Video, "video", ".mp4")
	return out
}

// hasFiles reports whether the message carries a file openbot saves.
func hasFiles(m *message) bool {
	return len(m.Photo) > 0 || m.Document != nil || m.Voice != nil || m.Audio != nil || m.Video != nil
}

// FetchFile implements core.FileFetcher: getFile, then a GET of the file URL
// (<api>/file/bot<token>/<file_path>). Bot API errors are *APIError.
func (a *Adapter) FetchFile(ctx context.Context, att core.Attachment) (io.ReadCloser, error) {
	res, err := a.call(ctx, "getFile", tgbotapi.Params{"file_id": att.Ref}, requestTimeout)
	if err != nil {
		return nil, err
	}
	var f struct {
		FilePath string `json:"file_path"`
	}
	if err := json.Unmarshal(res, &f); err != nil || f.FilePath == "" {
		return nil, fmt.Errorf("telegram getFile: no file_path in %s", res)
	}
	url := fmt.Sprintf(strings.Replace(a.endpoint, "/bot%s/%s", "/file/bot%s/%s", 1), a.token, f.FilePath)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, a.redact(err)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, a.redact(fmt.Errorf("telegram file download: %w", err))
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, &APIError{Method: "file download", Code: resp.StatusCode, Description: resp.Status}
	}
	return resp.Body, nil
}

// UploadFile implements core.FileUploader: sendPhoto for images, else
// sendDocument, with the caption, in the conversation's topic, replying to the
// message the run answers. A failed call posts nothing, so a retry never posts
// the file twice.
func (a *Adapter) UploadFile(ctx context.Context, d core.FileDelivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", permanentError{fmt.Errorf("telegram: upload to %q: %w", d.Conversation, err)}
	}
	f, err := os.Open(d.File.Path)
	if err != nil {
		return "", permanentError{fmt.Errorf("telegram: upload: %w", err)}
	}
	defer f.Close()
	method, field := "sendDocument", "document"
	if d.File.IsImage() && d.File.Size <= 10<<20 {
		method, field = "sendPhoto", "photo"
	}
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(conv.Chat, 10)}
	p.AddNonZero64("message_thread_id", conv.Topic)
	caption := d.File.Caption
	if d.Sender.Handle != "" && a.bot == "*" {
		caption = strings.TrimSpace("@" + d.Sender.Handle + ": " + caption)
	}
	p.AddNonEmpty("caption", truncateRunes(caption, 1024))
	if rt, _ := strconv.ParseInt(d.ReplyTo, 10, 64); rt != 0 {
		rp, _ := json.Marshal(replyParameters{MessageID: rt, AllowSendingWithoutReply: true})
		p["reply_parameters"] = string(rp)
	}
	uctx, cancel := context.WithTimeout(ctx, 2*requestTimeout)
	defer cancel()
	bot := &tgbotapi.BotAPI{Token: a.token, Client: ctxDoer{ctx: uctx, hc: a.hc}}
	bot.SetAPIEndpoint(a.endpoint)
	resp, err := bot.UploadFiles(method, p, []tgbotapi.RequestFile{{Name: field, Data: tgbotapi.FileReader{Name: d.File.Name, Reader: f}}})
	if err != nil {
		var te *tgbotapi.Error
		if errors.As(err, &te) {
			return "", &APIError{Method: method, Code: te.Code, Description: te.Message, RetryAfterSeconds: te.RetryAfter}
		}
		return "", a.redact(fmt.Errorf("telegram %s: %w", method, err))
	}
	var m struct {
		MessageID int64 `json:"message_id"`
	}
	if err := json.Unmarshal(resp.Result, &m); err != nil {
		return "", fmt.Errorf("telegram %s: decoding result: %w", method, err)
	}
	return strconv.FormatInt(m.MessageID, 10), nil
}

// truncateRunes cuts s to at most n runes.
func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

var (
	_ core.FileFetcher  = (*Adapter)(nil)
	_ core.FileUploader = (*Adapter)(nil)
)
