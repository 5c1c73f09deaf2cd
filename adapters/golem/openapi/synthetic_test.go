package openapi

import (
	"os"
	"strings"
	"testing"
)

// TestSchemaFeatures exercises the checker on a small spec with the features
// the yagna specs use rarely or not at all.
func TestSchemaFeatures(t *testing.T) {
	s, err := Load(os.DirFS("testdata/synthetic"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, target string
		request              bool
		status               int
		body                 string
		want                 []string
	}{
		{"request without readOnly id", "PUT", "/syn/v1/things/t1?renamed=true", true, 0, `{"secret":"s","name":null}`, nil},
		{"request may not send readOnly", "PUT", "/syn/v1/things/t1", true, 0, `{"id":"t1","secret":"s","name":"x"}`, []string{"$.id: readOnly member sent"}},
		{"request needs writeOnly", "PUT", "/syn/v1/things/t1", true, 0, `{"name":"x"}`, []string{`"secret" is missing`}},
		{"sibling of $ref renames the parameter", "PUT", "/syn/v1/things/t1?flag=true", true, 0, `{"secret":"s","name":"x"}`, []string{`"flag" is not declared`}},
		{"boolean parameter", "PUT", "/syn/v1/things/t1?renamed=yes", true, 0, `{"secret":"s","name":"x"}`, []string{`"yes" is not a boolean`}},
		{"additionalProperties schema", "PUT", "/syn/v1/things/t1", true, 0, `{"secret":"s","name":"x","labels":{"a":1,"b":"two"}}`, []string{"$.labels.b: string where integer"}},
		{"anyOf", "PUT", "/syn/v1/things/t1", true, 0, `{"secret":"s","name":"x","either":true}`, nil},
		{"anyOf none", "PUT", "/syn/v1/things/t1", true, 0, `{"secret":"s","name":"x","either":"no"}`, []string{"none of anyOf"}},
		{"minItems", "PUT", "/syn/v1/things/t1", true, 0, `{"secret":"s","name":"x","tags":[]}`, []string{"at least 1"}},
		{"maxItems", "PUT", "/syn/v1/things/t1", true, 0, `{"secret":"s","name":"x","tags":["a","b","c"]}`, []string{"at most 2"}},
		{"response needs readOnly, not writeOnly", "PUT", "/syn/v1/things/t1", false, 200, `{"id":"t1","name":null}`, nil},
		{"response may not send writeOnly", "PUT", "/syn/v1/things/t1", false, 200, `{"id":"t1","name":"x","secret":"s"}`, []string{"$.secret: writeOnly member sent"}},
		{"non-nullable null", "PUT", "/syn/v1/things/t1", false, 200, `{"id":null,"name":"x"}`, []string{"$.id: null where string"}},
		{"204", "PUT", "/syn/v1/things/t1", false, 204, ``, nil},
		{"explicit mapping", "GET", "/syn/v1/pets?kinds=cat,dog", false, 200, `[{"kind":"cat","lives":9},{"kind":"dog","good":true}]`, nil},
		{"mapped schema applies", "GET", "/syn/v1/pets", false, 200, `[{"kind":"cat","lives":10},{"kind":"dog","lives":1}]`, []string{"$[0].lives: 10 is above the maximum", "$[1].lives: member not declared"}},
		{"array query item enum", "GET", "/syn/v1/pets?kinds=cat,cow", true, 0, ``, []string{"query parameter kinds[1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.request {
				err = s.CheckRequest(tt.method, tt.target, []byte(tt.body))
			} else {
				err = s.CheckResponse(tt.method, tt.target, tt.status, []byte(tt.body))
			}
			assertProblems(t, err, tt.want)
		})
	}
}

func TestRecursiveSchemaIsReported(t *testing.T) {
	_, err := Load(os.DirFS("testdata/cycle"))
	if err == nil || !strings.Contains(err.Error(), "recursive") {
		t.Fatalf("err = %v", err)
	}
}
