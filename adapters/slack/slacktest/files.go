package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"openbot/adapters/internal/fakeserver"
	"strings"
)

// Files: AddFile serves a file at a url_private_download on the fake's host
// (GET /files-pri/<id>/<name>, bot token required as Bearer); the external
// upload flow is files.getUploadURLExternal (an upload URL on the fake),
// POST /upload/<file id> (multipart "file" or a raw body) and
// files.completeUploadExternal, which posts the uploaded file into its channel
// and thread as a Message with File, FileName and the initial comment as Text.
// An upload that is never completed posts nothing. FailNext works on the two
// Web API methods as on any other.

// File is an uploaded or served file.
type File struct {
	ID, Name, Content string
}

// AddFile makes content downloadable and returns its url_private_download.
func (s *Server) AddFile(id, name, content string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.files = map[string]File{}
	}
	s.files[id] = File{ID: id, Name: name, Content: content}
	return s.srv.URL + "/files-pri/" + id + "/" + name
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/files-pri/"), "/")
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	f, ok := s.files[id]
	s.calls = append(s.calls, Call{Method: "file.download", Form: map[string][]string{"id": {id}}})
	s.changes.Notify()
	s.mu.Unlock()
	if s.opts.BotToken != "" && token != s.opts.BotToken {
		http.Redirect(w, r, "/signin", http.StatusFound)
		return
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	io.WriteString(w, f.Content)
}

// serveUpload stores the body posted to an upload URL until completion.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/upload/")
	var data []byte
	name := ""
	if f, fh, err := r.FormFile("file"); err == nil {
		data, _ = io.ReadAll(f)
		f.Close()
		name = fh.Filename
	} else {
		data, _ = io.ReadAll(io.LimitReader(r.Body, 8<<20))
	}
	s.mu.Lock()
	if s.uploads == nil {
		s.uploads = map[string]File{}
	}
	s.uploads[id] = File{ID: id, Name: name, Content: string(data)}
	s.calls = append(s.calls, Call{Method: "file.upload", Form: map[string][]string{"id": {id}}})
	s.changes.Notify()
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, "OK - "+fmt.Sprint(len(data)))
}

// fileMethod answers files.getUploadURLExternal and files.completeUploadExternal;
// it reports false for other methods.
func (s *Server) fileMethod(w http.ResponseWriter, method string, call Call) bool {
	switch method {
	case "files.getUploadURLExternal":
		s.mu.Lock()
		s.seq++
		id := fmt.Sprintf("F%06d", s.seq)
		s.mu.Unlock()
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "upload_url": s.srv.URL + "/upload/" + id, "file_id": id})
	case "files.completeUploadExternal":
		var files []struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		}
		_ = json.Unmarshal([]byte(call.Form.Get("files")), &files)
		s.mu.Lock()
		var posted []map[string]any
		for _, f := range files {
			up, ok := s.uploads[f.ID]
			if !ok {
				continue
			}
			delete(s.uploads, f.ID)
			s.seq++
			ts := fmt.Sprintf("1767300000.%06d", s.seq)
			s.msgs = append(s.msgs, &Message{Channel: call.Form.Get("channel_id"), TS: ts, ThreadTS: call.Form.Get("thread_ts"),
				Text: call.Form.Get("initial_comment"), File: up.Content, FileName: f.Title})
			posted = append(posted, map[string]any{"id": f.ID, "title": f.Title})
		}
		s.changes.Notify()
		s.mu.Unlock()
		if len(posted) != len(files) || len(files) == 0 {
			fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "file_not_found"})
			return true
		}
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "files": posted})
	default:
		return false
	}
	return true
}
