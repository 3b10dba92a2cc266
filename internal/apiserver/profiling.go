package apiserver

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// profilesPath is where Go's profiles are served, as kube-apiserver's
// --profiling does: reached through the whole chain, so only users allowed
// the non-resource URL (cluster-admin, system:masters) read them.
const profilesPath = "/debug/pprof"

// servesProfiles says the path is a profile this server serves.
func (s *Server) servesProfiles(path string) bool {
	return !s.cfg.DisableProfiling && (path == profilesPath || strings.HasPrefix(path, profilesPath+"/"))
}

// serveProfiles answers /debug/pprof/...: the index, cmdline, a CPU
// profile, symbols, a trace, or a named profile (heap, goroutine, ...).
func serveProfiles(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, profilesPath) {
	case "":
		http.Redirect(w, r, profilesPath+"/", http.StatusMovedPermanently)
	case "/cmdline":
		pprof.Cmdline(w, r)
	case "/profile":
		pprof.Profile(w, r)
	case "/symbol":
		pprof.Symbol(w, r)
	case "/trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r) // the index, and named profiles by their last path element
	}
}
