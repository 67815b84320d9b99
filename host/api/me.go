package api

import (
	"net/http"

	"github.com/toolhost/toolhost/host/auth"
)

// me tells callers who they are: their principal and role, their budgets
// and use over the last hour, how many runs they may have going at once
// and how many they have.
func (s *Server) me(w http.ResponseWriter, r *http.Request, id auth.Identity) {
	d := s.opts.Dispatcher
	use, err := d.Use(r.Context(), id.Name)
	if err != nil {
		s.opts.Logger.Error("a caller's budgets could not be counted", "principal", id.Name, "error", err)
		we := wireError(err)
		writeError(w, http.StatusInternalServerError, we.Code, we.Message)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"principal":   id.Name,
		"role":        id.Role,
		"budgets":     use,
		"max_running": d.MaxRunning(id.Name),
		"going":       d.Going(id.Name),
	})
}
