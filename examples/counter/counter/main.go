// Command counter is the counter of examples/counter: a FROM scratch image of this one static binary,
// built from this folder by gcompose (the payload's build: ./counter). It serves GET /count on :8080,
// answering the next number.
package main

import (
	"fmt"
	"log"
	"net/http"
	"sync"
)

func main() {
	var mu sync.Mutex
	n := 0
	log.Fatal(http.ListenAndServe(":8080", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		v := n
		mu.Unlock()
		fmt.Fprint(w, v)
	})))
}
