package descriptor

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Immutable patterns (package-level regexps hold no mutable state).
var (
	dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	// Docker image references (distribution/reference grammar).
	imageDomainRE    = regexp.MustCompile(`^(?:localhost|(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?$`)
	imageComponentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$`)
	imageTagRE       = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
	imageDigestRE    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$`)
)

// checkDNSLabel explains why name is not a DNS label (RFC 1123), or returns "".
func checkDNSLabel(name string) string {
	if dnsLabelRE.MatchString(name) {
		return ""
	}
	switch {
	case name == "":
		return "is empty"
	case len(name) > 63:
		return fmt.Sprintf("is %d characters long, more than 63", len(name))
	case strings.ToLower(name) != name:
		return "has upper-case letters"
	case strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-"):
		return "starts or ends with a hyphen"
	default:
		return "may only hold lower-case letters, digits and hyphens"
	}
}

// sanitizeName turns free text into a DNS label: "External API request
// [EXPERIMENTAL]." -> "external-api-request-experimental".
func sanitizeName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		default:
			dash = true
		}
		if b.Len() >= 63 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

// nameFromFile derives an application name from a descriptor file name:
// ./apps/web.gaom.yaml -> web-gaom.
func nameFromFile(path string) string {
	base := filepath.Base(path)
	for _, ext := range []string{".yaml", ".yml", ".zip"} {
		if strings.HasSuffix(strings.ToLower(base), ext) {
			base = base[:len(base)-len(ext)]
			break
		}
	}
	return sanitizeName(base)
}

// checkImageRef explains why ref is not a valid image reference, or returns "".
// Accepted: [domain[:port]/]path[:tag][@digest], e.g.
// registry:5000/team/img:1.0 or img@sha256:<64 hex>.
func checkImageRef(ref string) string {
	if ref == "" {
		return "is empty"
	}
	if len(ref) > 512 {
		return "is too long"
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest {
		if !imageDigestRE.MatchString(digest) {
			return fmt.Sprintf("has an invalid digest %q (want algorithm:hex, e.g. sha256:<64 hex digits>)", digest)
		}
		if alg, hex, _ := strings.Cut(digest, ":"); alg == "sha256" && len(hex) != 64 {
			return fmt.Sprintf("has a sha256 digest of %d hex digits, not 64", len(hex))
		}
	}
	// A tag follows the last colon after the last slash.
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		tag := name[i+1:]
		name = name[:i]
		if !imageTagRE.MatchString(tag) {
			return fmt.Sprintf("has an invalid tag %q", tag)
		}
	}
	parts := strings.Split(name, "/")
	if len(parts) > 1 && (strings.ContainsAny(parts[0], ".:") || parts[0] == "localhost" || strings.ToLower(parts[0]) != parts[0]) {
		if !imageDomainRE.MatchString(parts[0]) {
			return fmt.Sprintf("has an invalid registry %q", parts[0])
		}
		parts = parts[1:]
	}
	if len(name) > 255 {
		return "has a name longer than 255 characters"
	}
	for _, p := range parts {
		if !imageComponentRE.MatchString(p) {
			return fmt.Sprintf("has an invalid path component %q (lower-case letters, digits and . _ - separators)", p)
		}
	}
	return ""
}
