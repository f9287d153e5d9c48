package slack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/slack-go/slack"

	"openbot/core"
)

// Files in both directions (DESIGN.md §4 ingest): the files of a message event
// become core.Attachments whose Ref is url_private_download; FetchFile
// downloads it with the bot token (files:read), which slack-go sends only to
// Slack's own https hosts or the configured API URL. A bot's file goes out
// with the external upload flow (files:write): files.getUploadURLExternal, the
// upload, then files.completeUploadExternal into the conversation's thread.

// fileTimeout bounds one upload or completion call; downloads are bounded by
// the caller's context.
const fileTimeout = 2 * apiTimeout

// attachmentsOf lists a message event's files.
func attachmentsOf(files []slack.File) []core.Attachment {
	var out []core.Attachment
	for _, f := range files {
		ref := cmp.Or(f.URLPrivateDownload, f.URLPrivate)
		kind := "document"
		switch {
		case strings.HasPrefix(f.Mimetype, "image/"):
			kind = "image"
		case strings.HasPrefix(f.Mimetype, "audio/"):
			kind = "audio"
		case strings.HasPrefix(f.Mimetype, "video/"):
			kind = "video"
		}
		name := cmp.Or(f.Name, f.Title)
		out = append(out, core.Attachment{Name: name, Type: f.Mimetype, Kind: kind, Size: int64(f.Size), Ref: ref})
	}
	return out
}

// FetchFile implements core.FileFetcher: it streams url_private_download
// through slack-go's GetFileContext. The download runs in a goroutine that
// ends when the body is read, closed, or ctx is done.
func (a *Adapter) FetchFile(ctx context.Context, att core.Attachment) (io.ReadCloser, error) {
	if att.Ref == "" {
		return nil, &deliveryError{err: errors.New("slack: the file has no download URL (deleted or hidden)"), permanent: true}
	}
	pr, pw := io.Pipe()
	go func() {
		err := a.api.GetFileContext(ctx, att.Ref, pw)
		if err != nil {
			err = mapError(err)
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// UploadFile implements core.FileUploader with the external upload flow into
// the conversation's thread, the caption as the initial comment. Only the
// completion shares the file, so a failed attempt posts nothing and a retry
// never posts it twice. It returns the Slack file id.
func (a *Adapter) UploadFile(ctx context.Context, d core.FileDelivery) (string, error) {
	conv, err := ParseConversation(d.Conversation)
	if err != nil {
		return "", &deliveryError{err: fmt.Errorf("%w: %q", err, d.Conversation), permanent: true}
	}
	f, err := os.Open(d.File.Path)
	if err != nil {
		return "", &deliveryError{err: fmt.Errorf("slack upload: %w", err), permanent: true}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return "", &deliveryError{err: fmt.Errorf("slack upload: %s is empty or unreadable", d.File.Name), permanent: true}
	}
	cctx, cancel := context.WithTimeout(ctx, fileTimeout)
	defer cancel()
	up, err := a.api.GetUploadURLExternalContext(cctx, slack.GetUploadURLExternalParameters{FileName: d.File.Name, FileSize: int(st.Size())})
	if err != nil {
		return "", mapError(err)
	}
	if err := a.api.UploadToURL(cctx, slack.UploadToURLParameters{UploadURL: up.UploadURL, Reader: f, Filename: d.File.Name}); err != nil {
		return "", mapError(err)
	}
	comment := d.File.Caption
	if d.Sender.Handle != "" && d.Sender.Handle != a.bot {
		comment = strings.TrimSpace("*" + d.Sender.Name + "*: " + comment)
	}
	_, err = a.api.CompleteUploadExternalContext(cctx, slack.CompleteUploadExternalParameters{
		Files:           []slack.FileSummary{{ID: up.FileID, Title: d.File.Name}},
		Channel:         conv.Channel,
		ThreadTimestamp: conv.ThreadTS,
		InitialComment:  comment,
	})
	if err != nil {
		return "", mapError(err)
	}
	return up.FileID, nil
}

var (
	_ core.FileFetcher  = (*Adapter)(nil)
	_ core.FileUploader = (*Adapter)(nil)
)
