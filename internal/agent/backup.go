package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/store"
)

// backupPath is the admin endpoint `pith backup` calls on a running Pith
// (see docs/backup.md).
const backupPath = "/api/v1/admin/backup"

// backupRequest is the body of POST /api/v1/admin/backup.
type backupRequest struct {
	Dest string `json:"dest"` // absolute path of the destination directory on the server
}

// backupHandler serves POST /api/v1/admin/backup: a backup of the running
// store into the directory the JSON body names. The route is under
// /api/v1/admin/, so it needs an admin key. One backup runs at a time.
type backupHandler struct {
	db      *store.DB
	log     *slog.Logger
	running sync.Mutex
}

func newBackupHandler(db *store.DB, log *slog.Logger) http.Handler {
	return &backupHandler{db: db, log: log}
}

func (h *backupHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		api.WriteError(w, http.StatusMethodNotAllowed, "use POST with {\"dest\": \"/absolute/dir\"}")
		return
	}
	var req backupRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		api.WriteError(w, http.StatusBadRequest, fmt.Sprintf("decode body: %v", err))
		return
	}
	if req.Dest == "" || !filepath.IsAbs(req.Dest) {
		api.WriteError(w, http.StatusBadRequest, fmt.Sprintf("dest %q: want an absolute directory path on the server", req.Dest))
		return
	}
	if !h.running.TryLock() {
		api.WriteError(w, http.StatusConflict, "a backup is already running")
		return
	}
	defer h.running.Unlock()
	st, err := h.db.Backup(r.Context(), filepath.Clean(req.Dest))
	if err != nil {
		h.log.Error("backup", "dest", req.Dest, "err", err)
		api.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(st)
}
