// Command payloadapp is the e2e tests' payload that has nothing but itself: one static binary in a FROM
// scratch image (no shell, no ip, no init), a counter behind a front page, as a new user writes one.
//
//	payloadapp counter              serves GET /count (the next number) on :8080
//	payloadapp front                serves GET / on :80: "visit N" from the counter named in /counter
//	payloadapp set-counter ADDRESS  writes ADDRESS to /counter (an ExeScript run, after the start)
//	payloadapp get URL              prints the body of GET URL
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: payloadapp counter | front | set-counter ADDRESS")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "counter":
		var mu sync.Mutex
		n := 0
		err = http.ListenAndServe(":8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			n++
			v := n
			mu.Unlock()
			fmt.Fprint(w, v)
		}))
	case "front":
		c := &http.Client{Timeout: 5 * time.Second}
		err = http.ListenAndServe(":80", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			b, _ := io.ReadAll(resp.Body)
			fmt.Fprintf(w, "visit %s\n", b)
		}))
	case "set-counter":
		if len(os.Args) != 3 {
			err = fmt.Errorf("set-counter ADDRESS")
			break
		}
		err = os.WriteFile("/counter", []byte(os.Args[2]+"\n"), 0o644)
		if err == nil {
			fmt.Println("counter at", os.Args[2])
		}
	case "get":
		if len(os.Args) != 3 {
			err = fmt.Errorf("get URL")
			break
		}
		var resp *http.Response
		if resp, err = (&http.Client{Timeout: 5 * time.Second}).Get(os.Args[2]); err == nil {
			_, err = io.Copy(os.Stdout, resp.Body)
			resp.Body.Close()
		}
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "payloadapp:", err)
		os.Exit(1)
	}
}
