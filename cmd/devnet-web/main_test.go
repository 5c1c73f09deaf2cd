package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestInitDBWaitsForTheDatabase: initdb keeps trying while the database does not answer yet, and when it
// never does, says how long it tried and why the last attempt failed.
func TestInitDBWaitsForTheDatabase(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	if err := initDB(db{base: srv.URL, hc: srv.Client()}, "hi", 30*time.Second); err != nil || calls.Load() != 3 {
		t.Fatalf("initDB = %v after %d calls, want success at the third", err, calls.Load())
	}

	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ln.Close()
	err = initDB(db{base: base, hc: &http.Client{}}, "hi", time.Second)
	if err == nil || !strings.Contains(err.Error(), "the database at "+base+" did not take the greeting in") ||
		!strings.Contains(err.Error(), "attempts); the last: writing greeting to the database: Put") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("initDB against a closed port = %v", err)
	}
}
