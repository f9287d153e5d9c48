package core

import (
	"context"
	"fmt"
	"io"
	"mime"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Attachment is one file on a message (DESIGN.md §4 ingest; files in both
// directions). On a person's message it is what the platform sent: Ref is the
// adapter's opaque download reference until the download queue saved the file
// (Path, relative to the thread's workspace, "inbox/<message>/<name>") or gave up
// (Error says why: too large, download failed). On a bot's message it is a file
// to post: Path is the absolute path of the workspace file.
type Attachment struct {
	// Name is the file name, made safe by SafeFileName.
	Name string `json:"name"`
	// Type is the MIME type ("image/png"); "" when unknown.
	Type string `json:"type,omitempty"`
	// Kind is "image", "document", "voice", "audio" or "video".
	Kind string `json:"kind,omitempty"`
	// Size is the size in bytes as the platform declared it or as saved; 0 unknown.
	Size int64 `json:"size,omitempty"`
	// Ref is the adapter's download reference (a URL, a file_id, a resource key).
	Ref   string `json:"ref,omitempty"`
	Path  string `json:"path,omitempty"`
	Error string `json:"error,omitempty"`
	// Caption is the text posted with an outbound file.
	Caption string `json:"caption,omitempty"`
	// Transcript is the text of a saved voice note or audio file when
	// FileLimits.Transcribe is set (optional).
	Transcript string `json:"transcript,omitempty"`
	// Data is the content of a file that came with the message itself (an
	// inbound webhook's raw payload) instead of a platform reference: stored
	// with the message at ingest, written to the workspace by the download
	// queue like a fetched file, and dropped once saved.
	Data []byte `json:"data,omitempty"`
}

// Pending reports whether an inbound attachment still waits for its download.
func (a Attachment) Pending() bool { return a.Path == "" && a.Error == "" }

// IsImage reports whether the attachment is an image by kind or MIME type.
func (a Attachment) IsImage() bool {
	return a.Kind == "image" || strings.HasPrefix(a.Type, "image/")
}

// Line is the text line the stored message gains for the attachment, so the
// model and the history know it existed: name, type, size and workspace path,
// or why it was not saved.
func (a Attachment) Line() string {
	typ := a.Type
	if typ == "" {
		typ = a.Kind
	}
	head := fmt.Sprintf("[attachment: %s (%s, %s)", a.Name, typ, HumanSize(a.Size))
	switch {
	case a.Path != "" && a.Transcript != "":
		return head + " saved at " + a.Path + "]\n[transcript of " + a.Name + "]: " + a.Transcript
	case a.Path != "":
		return head + " saved at " + a.Path + "]"
	case a.Error != "":
		return head + " not saved: " + a.Error + "]"
	}
	return head + " downloading]"
}

// HumanSize formats a byte count as "512 B", "12.3 KB", "4.0 MB"; "size unknown" for 0.
func HumanSize(n int64) string {
	switch {
	case n <= 0:
		return "size unknown"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}

// maxFileName is the longest safe file name in bytes (most file systems allow 255).
const maxFileName = 120

// SafeFileName turns a platform-supplied name into one safe to create inside a
// directory: path separators, "..", leading dots, control and other invisible
// characters are replaced, the name is cut to 120 bytes keeping its extension,
// and an empty result becomes fallback (or "file").
func SafeFileName(name, fallback string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '/' || r == '\\' || r == ':' || r == 0:
			b.WriteRune('_')
		case r == utf8.RuneError || unicode.IsControl(r) || !unicode.IsPrint(r) && r != ' ':
			b.WriteRune('_')
		default:
			b.WriteRune(r)
		}
	}
	s := strings.TrimSpace(b.String())
	for strings.Contains(s, "..") {
		s = strings.ReplaceAll(s, "..", "_")
	}
	s = strings.TrimLeft(s, ". ")
	if s == "" || strings.Trim(s, "_") == "" {
		s = fallback
		if s == "" {
			s = "file"
		}
	}
	if len(s) > maxFileName {
		ext := path.Ext(s)
		if len(ext) > 16 || !utf8.ValidString(ext) {
			ext = ""
		}
		stem := s[:maxFileName-len(ext)]
		for !utf8.ValidString(stem) {
			stem = stem[:len(stem)-1]
		}
		s = stem + ext
	}
	return s
}

// ExtensionFor returns a file extension (".png") for a MIME type, or "".
func ExtensionFor(typ string) string {
	if typ == "" {
		return ""
	}
	switch typ {
	case "image/jpeg":
		return ".jpg"
	case "audio/ogg":
		return ".ogg"
	}
	if exts, _ := mime.ExtensionsByType(typ); len(exts) > 0 {
		return exts[0]
	}
	return ""
}

// FileFetcher is implemented by adapters that can download a person's attached
// files (DESIGN.md §4): FetchFile opens the file named by a.Ref. The caller
// reads at most the size cap plus one byte and closes the body. Errors that are
// DeliveryErrors with Permanent true are not retried; others are, with backoff.
type FileFetcher interface {
	FetchFile(ctx context.Context, a Attachment) (io.ReadCloser, error)
}

// FileUploader is implemented by adapters that post files (the send_file tool):
// UploadFile posts the file at d.File.Path with d.File.Caption into the
// conversation and returns the platform message id. It is called from the
// conversation's delivery lane; errors are DeliveryErrors as for Deliver, and a
// failed attempt must leave nothing posted, so a retry never posts it twice.
// Adapters without it get a text naming the file's workspace path.
type FileUploader interface {
	UploadFile(ctx context.Context, d FileDelivery) (platformID string, err error)
}

// FileDelivery is one file to post in one conversation.
type FileDelivery struct {
	Outbox       OutboxID
	Thread       ThreadID
	Conversation ConversationRef
	// ReplyTo is the platform id of the message the run answers, when known.
	ReplyTo string
	Sender  Sender
	File    Attachment
}

// withAttachmentLines appends one line per attachment to text.
func withAttachmentLines(text string, as []Attachment) string {
	lines := make([]string, 0, len(as)+1)
	if strings.TrimSpace(text) != "" {
		lines = append(lines, text)
	}
	for _, a := range as {
		lines = append(lines, a.Line())
	}
	return strings.Join(lines, "\n")
}

// inboundAttachments copies an adapter's attachments with safe names, so the
// stored message never carries a name that could leave its inbox directory.
func inboundAttachments(in []Attachment) []Attachment {
	if len(in) == 0 {
		return nil
	}
	out := make([]Attachment, len(in))
	seen := map[string]bool{}
	for i, a := range in {
		a.Name = SafeFileName(a.Name, a.Kind+strconv.Itoa(i+1)+ExtensionFor(a.Type))
		if seen[a.Name] {
			a.Name = SafeFileName(strconv.Itoa(i+1)+"-"+a.Name, "")
		}
		seen[a.Name] = true
		a.Path, a.Error = "", ""
		out[i] = a
	}
	return out
}
