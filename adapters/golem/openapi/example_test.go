package openapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/gcompose/gcompose/adapters/golem/openapi"
)

// A server test wraps its handler; a client test wraps its transport. In a
// test, finish with checker.Report(t).
func ExampleChecker_Handler() {
	checker, err := openapi.NewChecker()
	if err != nil {
		panic(err)
	}
	yagnaLike := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated) // createNetwork answers 200 per the spec
		_, _ = io.WriteString(w, `{"id":"n1","ip":"192.168.0.0","mask":"255.255.255.0","gateway":""}`)
	})
	srv := httptest.NewServer(checker.Handler(yagnaLike))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/net-api/v1/net", "application/json", nil)
	if err != nil {
		panic(err)
	}
	_ = resp.Body.Close()
	for _, e := range checker.Errors() {
		fmt.Println(e)
	}
	// Output:
	// POST /net-api/v1/net (createNetwork) request: body: required body is missing
	// POST /net-api/v1/net (createNetwork) response: status: 201 is not documented (documented: 200, 400, 401, default)
}
