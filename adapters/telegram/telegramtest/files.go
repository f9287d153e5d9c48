package telegramtest

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Files: AddFile makes a file downloadable through getFile and the file URL
// (GET /file/bot<token>/<file_path>); sendDocument and sendPhoto (multipart)
// store the uploaded file on a Message (File, FileName, Caption) and answer
// like sendMessage. Scripted failures (Fail) apply to them as to any method.

// AddFile serves content under fileID for every bot.
func (s *Server) AddFile(fileID, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.files = map[string]string{}
	}
	s.files[fileID] = content
}

// serveFile answers GET /file/bot<token>/<file_path>; file_path is "files/<file_id>".
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/file/bot")
	token, p, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	_, known := s.bots[token]
	body, ok := s.files[strings.TrimPrefix(p, "files/")]
	s.calls = append(s.calls, Call{Token: token, Method: "file", Params: map[string]string{"path": p}, At: time.Now()})
	s.changes.Notify()
	s.mu.Unlock()
	if !known || !ok {
		http.NotFound(w, r)
		return
	}
	io.WriteString(w, body)
}

// getFile answers with the file's file_path, or 400 for an unknown file_id.
func (s *Server) getFile(w http.ResponseWriter, params map[string]string) {
	s.mu.Lock()
	body, ok := s.files[params["file_id"]]
	s.mu.Unlock()
	if !ok {
		writeError(w, Error{Code: 400, Description: "Bad Request: invalid file_id"})
		return
	}
	s.ok(w, map[string]any{"file_id": params["file_id"], "file_unique_id": "u" + params["file_id"],
		"file_size": len(body), "file_path": "files/" + params["file_id"]})
}

// upload answers sendDocument and sendPhoto: the file part named like the
// method's field is stored on a new Message.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, b *botState, method string, params map[string]string) {
	field := "document"
	if method == "sendPhoto" {
		field = "photo"
	}
	chatID, err := strconv.ParseInt(params["chat_id"], 10, 64)
	if err != nil || chatID == 0 || r.MultipartForm == nil || len(r.MultipartForm.File[field]) == 0 {
		writeError(w, Error{Code: 400, Description: fmt.Sprintf("Bad Request: there is no %s in the request", field)})
		return
	}
	fh := r.MultipartForm.File[field][0]
	f, err := fh.Open()
	if err != nil {
		writeError(w, Error{Code: 400, Description: "Bad Request: " + err.Error()})
		return
	}
	data, _ := io.ReadAll(f)
	f.Close()
	s.mu.Lock()
	id := s.nextMsg
	s.nextMsg++
	s.msgs = append(s.msgs, &Message{Token: b.Token, Chat: chatID, ID: id, Caption: params["caption"],
		File: string(data), FileName: fh.Filename, Method: method})
	s.changes.Notify()
	s.mu.Unlock()
	msg := map[string]any{
		"message_id": id,
		"from":       map[string]any{"id": b.ID, "is_bot": true, "first_name": b.Name, "username": b.Username},
		"chat":       map[string]any{"id": chatID, "type": "private"},
		"date":       time.Now().Unix(),
		"caption":    params["caption"],
	}
	if t, err := strconv.ParseInt(params["message_thread_id"], 10, 64); err == nil && t != 0 {
		msg["message_thread_id"] = t
	}
	s.ok(w, msg)
}
