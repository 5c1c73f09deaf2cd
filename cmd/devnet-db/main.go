// Command devnet-db is the devnet demo's tiny database: an in-memory key-value store over HTTP.
//
//	PUT /db/{key}   store the body        GET /db/{key}  read it back
//	GET /db         all records as JSON   GET /status    {"status":"ok"}
package main

import (
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

type store struct {
	mu   sync.Mutex
	data map[string]string
}

func main() {
	listen := flag.String("listen", ":4001", "address to listen on")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	st := &store{data: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("PUT /db/{key}", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		st.mu.Lock()
		st.data[r.PathValue("key")] = string(b)
		st.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /db/{key}", func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		v, ok := st.data[r.PathValue("key")]
		st.mu.Unlock()
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such key"})
			return
		}
		_, _ = io.WriteString(w, v)
	})
	mux.HandleFunc("GET /db", func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		type rec struct{ Key, Value string }
		out := make([]rec, 0, len(st.data))
		for k, v := range st.data {
			out = append(out, rec{k, v})
		}
		st.mu.Unlock()
		sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
		writeJSON(w, http.StatusOK, out)
	})
	log.Info("devnet-db listening", "addr", *listen)
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		log.Error("devnet-db", "err", err)
		os.Exit(1)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
