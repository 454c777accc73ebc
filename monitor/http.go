package monitor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Handler serves the registry over HTTP:
//
//	GET /livez    200 "ok", or 503 with the problems that fail CheckLive
//	GET /healthz  the same as /livez
//	GET /readyz   200 "ok", or 503 with the problems that fail either check
//	GET /status   the Report as JSON
//
// Mount it under a prefix with http.StripPrefix. The probes answer
// Kubernetes' liveness and readiness probes; a process that is not live is
// also not ready.
func (r *Registry) Handler() http.Handler {
	mux := http.NewServeMux()
	live := func(w http.ResponseWriter, _ *http.Request) { r.probe(w, CheckLive) }
	mux.HandleFunc("GET /livez", live)
	mux.HandleFunc("GET /healthz", live)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { r.probe(w, CheckReady) })
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		b, err := json.MarshalIndent(r.Report(), "", "  ")
		if err != nil {
			http.Error(w, "monitor: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(b, '\n'))
	})
	return mux
}

// probe answers a health probe: CheckLive counts only the problems that
// fail it, CheckReady all of them.
func (r *Registry) probe(w http.ResponseWriter, check Check) {
	rep := r.Report()
	var failing []string
	for _, p := range rep.Problems {
		if check == CheckReady || p.Check == check {
			failing = append(failing, "["+string(p.Check)+"] "+p.String())
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if len(failing) == 0 {
		_, _ = fmt.Fprintln(w, "ok")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = fmt.Fprintf(w, "%s: not %s\n%s\n", rep.Instance, check, strings.Join(failing, "\n"))
}
