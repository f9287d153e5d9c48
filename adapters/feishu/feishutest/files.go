package feishutest

import (
	"fmt"
	"io"
	"net/http"
	"openbot/adapters/internal/fakeserver"
	"strings"
)

// Files: AddResource serves a message resource at
// GET /open-apis/im/v1/messages/{id}/resources/{key}?type=image|file; POST
// /open-apis/im/v1/images and /open-apis/im/v1/files take a multipart upload
// and answer an image_key or file_key, whose content Upload returns. A message
// sent with msg_type image or file names its key in Content.

// Upload is a file the app uploaded.
type Upload struct {
	Key, Name, Type, Content string
}

// AddResource serves content as the resource key of message id.
func (s *Server) AddResource(messageID, key, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resources == nil {
		s.resources = map[string]string{}
	}
	s.resources[messageID+"/"+key] = content
}

// Uploaded returns an uploaded file by its image_key or file_key.
func (s *Server) Uploaded(key string) (Upload, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.uploads[key]
	return u, ok
}

func (s *Server) resource(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	if t := r.URL.Query().Get("type"); t != "image" && t != "file" {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 234001, "msg": "Invalid request param: type"})
		return
	}
	s.mu.Lock()
	body, ok := s.resources[r.PathValue("id")+"/"+r.PathValue("key")]
	s.mu.Unlock()
	if !ok {
		fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 234003, "msg": "File not in msg."})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	io.WriteString(w, body)
}

// uploadHandler answers im/v1/images (kind "image") and im/v1/files ("file").
func (s *Server) uploadHandler(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r) {
			return
		}
		f, fh, err := r.FormFile(kind)
		if err != nil {
			fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 234001, "msg": "Invalid request param: " + kind})
			return
		}
		data, _ := io.ReadAll(f)
		f.Close()
		if kind == "file" && (r.FormValue("file_type") == "" || r.FormValue("file_name") == "") {
			fakeserver.WriteJSON(w, http.StatusBadRequest, map[string]any{"code": 234001, "msg": "Invalid request param: file_type/file_name"})
			return
		}
		s.mu.Lock()
		if s.uploads == nil {
			s.uploads = map[string]Upload{}
		}
		s.msgSeq++
		key := fmt.Sprintf("%s_v3_fake%06d", map[string]string{"image": "img", "file": "file"}[kind], s.msgSeq)
		s.uploads[key] = Upload{Key: key, Name: strings.TrimSpace(fh.Filename), Type: r.FormValue("file_type"), Content: string(data)}
		s.changes.Notify()
		s.mu.Unlock()
		fakeserver.WriteJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{kind + "_key": key}})
	}
}
