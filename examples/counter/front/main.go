// Command front is the front page of examples/counter: a FROM scratch image of this one static binary,
// built from this folder by gcompose (the payload's build: ./front).
//
//	front                      serves GET / on :80: a greeting and the visit number the counter answers
//	front set-counter ADDRESS  writes the counter's VPN address to /counter (the service's init)
//
// The image has no shell: the init runs this binary's set-counter.
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"
)

// greeting is the page's first words; edit it (or set it with go build -ldflags "-X main.greeting=...") and
// deploy to see a rebuild of the front alone.
var greeting = "Hello from the front"

func main() {
	if len(os.Args) == 3 && os.Args[1] == "set-counter" {
		if err := os.WriteFile("/counter", []byte(os.Args[2]+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Println("counter at", os.Args[2])
		return
	}
	c := &http.Client{Timeout: 5 * time.Second}
	log.Fatal(http.ListenAndServe(":80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr, err := os.ReadFile("/counter")
		if err != nil {
			http.Error(w, "no counter yet: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		resp, err := c.Get("http://" + strings.TrimSpace(string(addr)) + ":8080/count")
		if err != nil {
			http.Error(w, "counter: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		n, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(w, "%s: visit %s\n", greeting, n)
	})))
}
