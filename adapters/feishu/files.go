package feishu

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"openbot/core"
)

// Files in both directions (DESIGN.md §4 ingest). A person's image, file,
// audio or media message becomes a core.Attachment whose Ref is
// "<message_id>|<type>|<key>"; FetchFile downloads it from
// im/v1/messages/:message_id/resources/:key (permission im:resource). A bot's
// file is uploaded with im/v1/images (images up to 10 MB) or im/v1/files (up
// to 30 MB), then sent as an image or file message into the conversation with
// a uuid derived from the outbox entry, so a retry never posts it twice.

// Upload limits of the Open API.
const (
	maxImageUpload = 10 << 20
	maxFileUpload  = 30 << 20
	fileTimeout    = 2 * time.Minute
)

// fileAttachments returns the attachments of an image, file, audio or media
// message and true, or nil and false for other message types.
func fileAttachments(msgType, content, messageID string) ([]core.Attachment, bool) {
	var c struct {
		ImageKey string `json:"image_key"`
		FileKey  string `json:"file_key"`
		FileName string `json:"file_name"`
	}
	switch msgType {
	case "image", "file", "audio", "media":
	case "post":
		return postImages(content, messageID), false
	default:
		return nil, false
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return []core.Attachment{{Name: msgType, Kind: msgType, Error: "unreadable message content"}}, true
	}
	ref := func(typ, key string) string { return messageID + "|" + typ + "|" + key }
	switch msgType {
	case "image":
		return []core.Attachment{{Name: "image-" + short(c.ImageKey) + ".png", Type: "image/png", Kind: "image", Ref: ref("image", c.ImageKey)}}, true
	case "audio":
		return []core.Attachment{{Name: "voice-" + short(c.FileKey) + ".opus", Type: "audio/opus", Kind: "voice", Ref: ref("file", c.FileKey)}}, true
	case "media":
		return []core.Attachment{{Name: orDefault(c.FileName, "video-"+short(c.FileKey)+".mp4"), Type: "video/mp4", Kind: "video", Ref: ref("file", c.FileKey)}}, true
	}
	return []core.Attachment{{Name: orDefault(c.FileName, "file-"+short(c.FileKey)), Kind: "document", Ref: ref("file", c.FileKey)}}, true
}

// postImages lists the images of a received rich-text post (img elements);
// the post's text keeps an "[image]" mark where each was.
func postImages(content, messageID string) []core.Attachment {
	var p struct {
		Content [][]struct {
			Tag      string `json:"tag"`
			ImageKey string `json:"image_key"`
		} `json:"content"`
	}
	if json.Unmarshal([]byte(content), &p) != nil {
		return nil
	}
	var out []core.Attachment
	for _, para := range p.Content {
		for _, e := range para {
			if e.Tag == "img" && e.ImageKey != "" {
				out = append(out, core.Attachment{Name: "image-" + short(e.ImageKey) + ".png", Type: "image/png", Kind: "image",
					Ref: messageID + "|image|" + e.ImageKey})
			}
		}
	}
	return out
}

func short(key string) string { return key[max(0, len(key)-12):] }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// FetchFile implements core.FileFetcher with the message resource API.
func (a *Adapter) FetchFile(ctx context.Context, att core.Attachment) (io.ReadCloser, error) {
	parts := strings.SplitN(att.Ref, "|", 3)
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return nil, &APIError{Op: "im.message.resource", Code: -1, Msg: "bad attachment reference", HTTPStatus: 400}
	}
	path := "/open-apis/im/v1/messages/" + url.PathEscape(parts[0]) + "/resources/" + url.PathEscape(parts[2]) + "?type=" + url.QueryEscape(parts[1])
	res, err := a.api.fileRequest(ctx, "im.message.resource", http.MethodGet, path, "", nil)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

// UploadFile implements core.FileUploader: upload, then an image or file
// message (and the caption as a text message) replied into the conversation.
func (a *Adapter) UploadFile(ctx context.Context, d core.FileDelivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", &APIError{Op: "im.file.upload", HTTPStatus: 400, Code: -1, Msg: err.Error()}
	}
	data, err := os.ReadFile(d.File.Path)
	if err != nil || len(data) == 0 {
		return "", &APIError{Op: "im.file.upload", HTTPStatus: 400, Code: -1, Msg: fmt.Sprintf("cannot read %s: %v", d.File.Name, err)}
	}
	msgType, content := "", ""
	if d.File.IsImage() && len(data) <= maxImageUpload {
		key, err := a.api.upload(ctx, "im.image.create", "/open-apis/im/v1/images", map[string]string{"image_type": "message"}, "image", d.File.Name, data, "image_key")
		if err != nil {
			return "", err
		}
		msgType, content = "image", mustJSON(map[string]string{"image_key": key})
	} else {
		if len(data) > maxFileUpload {
			return "", &APIError{Op: "im.file.create", HTTPStatus: 400, Code: -1, Msg: fmt.Sprintf("%s is larger than 30 MB", d.File.Name)}
		}
		fields := map[string]string{"file_type": fileType(d.File.Name), "file_name": d.File.Name}
		key, err := a.api.upload(ctx, "im.file.create", "/open-apis/im/v1/files", fields, "file", d.File.Name, data, "file_key")
		if err != nil {
			return "", err
		}
		msgType, content = "file", mustJSON(map[string]string{"file_key": key})
	}
	uuid := fmt.Sprintf("openbot-%d-file", d.Outbox)
	id, err := a.post(ctx, conv, d.ReplyTo, msgType, content, uuid)
	if err != nil {
		return "", err
	}
	if caption := strings.TrimSpace(d.File.Caption); caption != "" {
		if d.Sender.Handle != "" && d.Sender.Handle != a.bot {
			caption = d.Sender.Name + ": " + caption
		}
		if _, err := a.post(ctx, conv, d.ReplyTo, "text", textContent(caption), uuid+"-c"); err != nil {
			return "", err
		}
	}
	return id, nil
}

// fileType is im/v1/files' file_type for a name: opus, mp4, pdf, doc, xls,
// ppt, or stream for anything else.
func fileType(name string) string {
	switch ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(name), ".")); ext {
	case "opus", "mp4", "pdf", "doc", "xls", "ppt":
		return ext
	case "docx":
		return "doc"
	case "xlsx":
		return "xls"
	case "pptx":
		return "ppt"
	}
	return "stream"
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// upload posts a multipart form (fields plus the file under fileField) and
// returns data[keyField].
func (c *apiClient) upload(ctx context.Context, op, path string, fields map[string]string, fileField, name string, data []byte, keyField string) (string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	fw, err := mw.CreateFormFile(fileField, name)
	if err != nil {
		return "", err
	}
	_, _ = fw.Write(data)
	if err := mw.Close(); err != nil {
		return "", err
	}
	res, err := c.fileRequest(ctx, op, http.MethodPost, path, mw.FormDataContentType(), buf.Bytes())
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var out struct {
		Code int                        `json:"code"`
		Msg  string                     `json:"msg"`
		Data map[string]json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, maxResponseBytes)).Decode(&out); err != nil {
		return "", fmt.Errorf("feishu: %s: decoding response: %w", op, err)
	}
	var key string
	if out.Code != 0 || json.Unmarshal(out.Data[keyField], &key) != nil || key == "" {
		return "", &APIError{Op: op, HTTPStatus: res.StatusCode, Code: out.Code, Msg: orDefault(out.Msg, "no "+keyField)}
	}
	return key, nil
}

// fileRequest sends one authenticated request (plain net/http: a file body
// streams to the workspace, and the SDK would buffer it whole) and returns the response when its status
// is 2xx (the caller closes the body); otherwise the JSON error as *APIError.
// A refused token is refreshed and the call tried once more. Bounded by
// fileTimeout and ctx; the body of a returned response is read under ctx only.
func (c *apiClient) fileRequest(ctx context.Context, op, method, path, contentType string, body []byte) (*http.Response, error) {
	stale := ""
	for try := 0; ; try++ {
		tok, err := c.tenantToken(ctx, stale)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, fileTimeout)
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(rctx, method, c.base+path, rd)
		if err != nil {
			cancel()
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		res, err := c.http.Do(req)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("feishu: %s: %w", op, err)
		}
		if res.StatusCode/100 == 2 {
			res.Body = cancelOnClose{res.Body, cancel}
			return res, nil
		}
		var head struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		}
		_ = json.NewDecoder(io.LimitReader(res.Body, maxResponseBytes)).Decode(&head)
		res.Body.Close()
		cancel()
		e := &APIError{Op: op, HTTPStatus: res.StatusCode, Code: head.Code, Msg: head.Msg}
		if e.invalidToken() && try == 0 {
			stale = tok
			continue
		}
		return nil, e
	}
}

// cancelOnClose releases a request's timeout when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

var (
	_ core.FileFetcher  = (*Adapter)(nil)
	_ core.FileUploader = (*Adapter)(nil)
)
