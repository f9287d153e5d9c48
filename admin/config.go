package admin

import "net/http"

// configRoutes adds GET /api/v1/config, POST /api/v1/reload and GET
// /api/v1/channels when Options.Config, Reload and Channels are set.
func (s *Server) configRoutes() {
	if s.opts.Config != nil {
		s.mux.HandleFunc("GET /api/v1/config", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, s.opts.Config())
		})
	}
	if s.opts.Channels != nil {
		s.mux.HandleFunc("GET /api/v1/channels", func(w http.ResponseWriter, r *http.Request) {
			v, err := s.opts.Channels(r.Context())
			if !s.answered(w, r, err) {
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"items": v})
		})
	}
	if s.opts.Reload != nil {
		s.mux.HandleFunc("POST /api/v1/reload", s.reload)
	}
}

// reload is POST /api/v1/reload: 200 with the reload's report, or 422 with
// every problem of a refused configuration (the running one is kept). The
// reloader writes the activity log's line, naming the console's identity.
func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	rep, err := s.opts.Reload(r.Context(), s.by())
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	s.opts.Logger.Info("config reload from the console", "by", s.by().Name)
	writeJSON(w, http.StatusOK, rep)
}
