//go:build unix

package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// hub is the orchestrator's HTTP endpoint on 127.0.0.1: the fenced outbox
// (POST /write) and the instances' reports (POST /report).
type hub struct {
	rec  *recorder
	log  *slog.Logger
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

func startHub(rec *recorder, log *slog.Logger) (*hub, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hub{rec: rec, log: log, ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", h.handleWrite)
	mux.HandleFunc("POST /report", h.handleReport)
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(h.done)
		_ = h.srv.Serve(ln)
	}()
	return h, nil
}

// URL is the base URL instances post to.
func (h *hub) URL() string { return "http://" + h.ln.Addr().String() }

// close stops serving, waiting at most timeout for requests in progress.
func (h *hub) close(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		_ = h.srv.Close()
	}
	<-h.done
}

func (h *hub) handleWrite(w http.ResponseWriter, r *http.Request) {
	var req writeReq
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, rejected := h.rec.write(req)
	status := http.StatusOK
	if rejected != nil {
		status = http.StatusConflict
		h.log.Warn("fence: stale write rejected", rejected...)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(resp)
}

func (h *hub) handleReport(w http.ResponseWriter, r *http.Request) {
	var rep report
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&rep); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if msg, attrs := h.rec.report(rep); msg != "" {
		h.log.Info(msg, attrs...)
	}
	w.WriteHeader(http.StatusOK)
}
