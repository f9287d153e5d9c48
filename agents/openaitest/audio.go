package openaitest

import (
	"encoding/json"
	"io"
	"net/http"
)

// Transcription: POST /v1/audio/transcriptions (multipart: model, file)
// answers {"text": <the transcript set with SetTranscript>} and records the
// upload; Transcriptions returns what was uploaded.

// Transcribed is one recorded transcription request.
type Transcribed struct {
	Model, FileName, Content string
}

// SetTranscript sets the text every transcription answers.
func (s *Server) SetTranscript(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transcript = text
}

// Transcriptions returns the transcription requests so far.
func (s *Server) Transcriptions() []Transcribed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Transcribed(nil), s.transcribed...)
}

func (s *Server) serveAudio(w http.ResponseWriter, r *http.Request) {
	f, fh, err := r.FormFile("file")
	if err != nil || r.FormValue("model") == "" {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "file and model are required", "type": "invalid_request_error"}})
		return
	}
	b, _ := io.ReadAll(f)
	f.Close()
	s.mu.Lock()
	s.transcribed = append(s.transcribed, Transcribed{Model: r.FormValue("model"), FileName: fh.Filename, Content: string(b)})
	text := s.transcript
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"text": text})
}
