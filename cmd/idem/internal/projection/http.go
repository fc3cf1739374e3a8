package projection

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

// Handler serves the read model: GET /applied ({"count","transfer_ids"}),
// GET /accounts/{id} ({"id","debits","credits"}; 400 for an id the
// ledger would refuse, 404 for an account no event named) and GET /healthz.
func (p *Projection) Handler(log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /applied", func(w http.ResponseWriter, r *http.Request) {
		ids, err := p.Applied(r.Context())
		if err != nil {
			fail(w, log, err)
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Count       int     `json:"count"`
			TransferIDs []int64 `json:"transfer_ids"`
		}{len(ids), ids})
	})
	mux.HandleFunc("GET /accounts/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !transfers.ValidAccountID(id) {
			transfers.InvalidAccountID(w) // 400, as the ledger answers
			return
		}
		a, err := p.Account(r.Context(), id)
		switch {
		case errors.Is(err, ErrUnknownAccount):
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": "Unknown account", "status": 404,
				"detail": "no transfer event applied so far names this account"})
		case err != nil:
			fail(w, log, err)
		default:
			writeJSON(w, http.StatusOK, a)
		}
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, log *slog.Logger, err error) {
	if log != nil {
		log.Error("idem project: read failed", "err", err)
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "the read model is unavailable", http.StatusServiceUnavailable)
}
