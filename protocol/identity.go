package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
)

// IdentityLine formats identifying attributes as one line of action stdout
// (IdentityPrefix, compact JSON, newline).
func IdentityLine(identity map[string]any) (string, error) {
	raw, err := json.Marshal(identity)
	if err != nil {
		return "", fmt.Errorf("identity line: %w", err)
	}
	return IdentityPrefix + string(raw) + "\n", nil
}

// StateLine formats a state answer as the line that ends an action asked
// for it (RequestExt.AnswerState): StatePrefix, compact JSON, newline.
func StateLine(res StateResult) (string, error) {
	raw, err := json.Marshal(res)
	if err != nil {
		return "", fmt.Errorf("state line: %w", err)
	}
	return StatePrefix + string(raw) + "\n", nil
}

// ParseIdentityLines splits an action's stdout into the free text shown to the
// user and the identifying attributes reported on lines starting with
// IdentityPrefix (merged in order: a later line overrides a key of an earlier
// one). A malformed identity line is kept out of both and reported in err;
// text and identity still hold everything else. identity is nil when no line
// reported any.
func ParseIdentityLines(stdout []byte) (text string, identity map[string]any, err error) {
	out, err := parseAction(stdout, false)
	return out.Text, out.Identity, err
}

// ActionOutput is an action's stdout, read.
type ActionOutput struct {
	// Text is the free text for the user: every line but identity and
	// state lines.
	Text string
	// Identity merges the IdentityPrefix lines (nil: none).
	Identity map[string]any
	// State is the JSON of the StatePrefix line (nil: none), not yet
	// checked against the state answer's schema.
	State json.RawMessage
}

// ParseActionOutput is ParseIdentityLines that also takes the StatePrefix
// line out of the text: an action asked to answer its resource's state
// (RequestExt.AnswerState) ends with one. A malformed line, or a second
// state line, is reported in err; the output still holds everything else.
func ParseActionOutput(stdout []byte) (ActionOutput, error) {
	return parseAction(stdout, true)
}

func parseAction(stdout []byte, withState bool) (ActionOutput, error) {
	var res ActionOutput
	var out strings.Builder
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 64*1024), len(stdout)+1)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if withState {
			if rest, ok := strings.CutPrefix(line, StatePrefix); ok {
				switch {
				case res.State != nil:
					errs = append(errs, fmt.Errorf("stdout line %d: a second state line (want at most one)", n))
				case !isJSONObject(rest):
					errs = append(errs, fmt.Errorf("stdout line %d: state: want a JSON object (the state answer) after %q", n, StatePrefix))
				default:
					res.State = json.RawMessage(rest)
				}
				continue
			}
		}
		rest, ok := strings.CutPrefix(line, IdentityPrefix)
		if !ok {
			out.WriteString(line)
			out.WriteByte('\n')
			continue
		}
		var m map[string]any
		if e := json.Unmarshal([]byte(rest), &m); e != nil || m == nil {
			if e == nil {
				e = errors.New("want a JSON object")
			}
			errs = append(errs, fmt.Errorf("stdout line %d: identity: %w", n, e))
			continue
		}
		if res.Identity == nil {
			res.Identity = map[string]any{}
		}
		maps.Copy(res.Identity, m)
	}
	if e := sc.Err(); e != nil {
		errs = append(errs, fmt.Errorf("read action stdout: %w", e))
	}
	res.Text = out.String()
	if len(stdout) > 0 && stdout[len(stdout)-1] != '\n' {
		res.Text = strings.TrimSuffix(res.Text, "\n")
	}
	return res, errors.Join(errs...)
}

// isJSONObject says whether s is exactly one JSON object.
func isJSONObject(s string) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &m) == nil && m != nil
}
