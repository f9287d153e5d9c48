package core

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"strings"
)

// messageOp is the outbox operation for message m: a bot's message carrying a
// file is posted as a file (OpFile), everything else as a message.
func messageOp(m Message) OutboxOp {
	if strings.HasPrefix(string(m.Sender), "bot:") && len(m.Attachments) > 0 {
		return OpFile
	}
	return OpMessage
}

// fileSender returns the call that posts entry o's file through ad: the
// adapter's FileUploader, or for adapters without one (the terminal) a text
// naming the file and its path.
func (l *lanes) fileSender(ctx context.Context, ad Adapter, o OutboxEntry) (func(context.Context) (string, error), error) {
	d, err := l.delivery(ctx, o)
	if err != nil {
		return nil, err
	}
	var m Message
	if err := l.e.store.View(ctx, func(tx ReadTx) error {
		var err error
		m, err = tx.Message(o.Message)
		return err
	}); err != nil {
		return nil, err
	}
	if len(m.Attachments) == 0 {
		return func(ctx context.Context) (string, error) { return ad.Deliver(ctx, d) }, nil
	}
	f := m.Attachments[0]
	if up, ok := ad.(FileUploader); ok {
		fd := FileDelivery{Outbox: o.ID, Thread: o.Thread, Conversation: o.Conversation, ReplyTo: o.ReplyTo, Sender: d.Sender, File: f}
		return func(ctx context.Context) (string, error) { return up.UploadFile(ctx, fd) }, nil
	}
	d.Text = strings.TrimSpace(f.Caption + "\n📎 " + f.Name + " (" + HumanSize(f.Size) + "): " + f.Path)
	return func(ctx context.Context) (string, error) { return ad.Deliver(ctx, d) }, nil
}

// FilePoster is an optional capability of the RunEnv core provides: PostFile
// posts the workspace file at the absolute path abs, with an optional caption,
// into the run's thread as the bot's message, delivered through the durable
// outbox to every binding (FileUploader; a text with the path where the platform
// has none). The file is read when delivered; it must stay in place until then.
// Errors: the file is missing, not a regular file, or the store failed.
type FilePoster interface {
	PostFile(ctx context.Context, abs, caption string) (MessageID, error)
}

// PostFile implements FilePoster.
func (r *runEnv) PostFile(ctx context.Context, abs, caption string) (MessageID, error) {
	st, err := os.Stat(abs)
	if err != nil {
		return 0, fmt.Errorf("file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return 0, errors.New("not a regular file")
	}
	name := SafeFileName(filepath.Base(abs), "file")
	a := Attachment{Name: name, Type: mime.TypeByExtension(filepath.Ext(name)), Size: st.Size(), Path: abs, Caption: caption, Kind: "document"}
	if a.IsImage() {
		a.Kind = "image"
	}
	text := caption
	if text == "" {
		text = "📎 " + name
	}
	spec := botReply(r.job, text)
	spec.msg.Attachments = []Attachment{a}
	return r.post(ctx, spec)
}
