package descriptor

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/source"
)

// pkgFile is one descriptor file read from a package.
type pkgFile struct {
	name string // as positions call it: package.zip/app.yaml
	data []byte
}

// readPackage lists the descriptor files at the root of a ZIP package, sorted
// by name, refusing path traversal, absurd sizes, compression ratios and file
// counts. Files in sub-folders and files that are not YAML are ignored with a
// warning.
func readPackage(pkgName string, data []byte, lim Limits) ([]pkgFile, source.Diagnostics) {
	var diags source.Diagnostics
	at := source.Pos{File: pkgName}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		diags.Errorf(at, "not a readable ZIP package: %v", err)
		return nil, diags
	}
	if len(zr.File) > lim.MaxPackageFiles {
		diags.Errorf(at, "package has %d entries, more than the %d allowed", len(zr.File), lim.MaxPackageFiles)
		return nil, diags
	}
	var files []pkgFile
	var total int64
	seen := map[string]bool{}
	for _, f := range zr.File {
		name := f.Name
		if unsafeName(name) {
			diags.Errorf(at, "package entry %q escapes the package (absolute path or ..); refusing the package", name)
			continue
		}
		if f.FileInfo().IsDir() {
			continue
		}
		clean := path.Clean(name)
		if strings.Contains(clean, "/") {
			diags.Warnf(source.Pos{File: pkgName + "/" + clean}, "ignored: a package's descriptor files are at its root, not in sub-folders")
			continue
		}
		ext := strings.ToLower(path.Ext(clean))
		if ext != ".yaml" && ext != ".yml" {
			diags.Warnf(source.Pos{File: pkgName + "/" + clean}, "ignored: not a descriptor file (.yaml or .yml)")
			continue
		}
		if seen[clean] {
			diags.Errorf(at, "package holds %q twice", clean)
			continue
		}
		seen[clean] = true
		entry := pkgName + "/" + clean
		size := f.UncompressedSize64
		if size > uint64(lim.MaxFileBytes) {
			diags.Errorf(source.Pos{File: entry}, "uncompressed size %d bytes is more than the %d allowed for a descriptor", size, lim.MaxFileBytes)
			continue
		}
		if f.CompressedSize64 > 0 && size > 1<<20 && size/f.CompressedSize64 > uint64(lim.MaxCompressionRatio) {
			diags.Errorf(source.Pos{File: entry}, "compression ratio %d:1 is more than the %d:1 allowed (a zip bomb?)", size/f.CompressedSize64, lim.MaxCompressionRatio)
			continue
		}
		total += int64(size)
		if total > lim.MaxPackageBytes {
			diags.Errorf(at, "package uncompresses to more than the %d bytes allowed", lim.MaxPackageBytes)
			return nil, diags
		}
		body, err := readEntry(f, lim.MaxFileBytes)
		if err != nil {
			diags.Errorf(source.Pos{File: entry}, "reading package entry: %v", err)
			continue
		}
		files = append(files, pkgFile{name: entry, data: body})
	}
	if diags.HasErrors() {
		return nil, diags
	}
	if len(files) == 0 {
		diags.Errorf(at, "package holds no descriptor file (.yaml or .yml) at its root")
		return nil, diags
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, diags
}

// unsafeName reports entry names that could write or read outside the package
// if extracted: absolute paths, drive letters, backslashes and .. elements.
func unsafeName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.ContainsRune(name, 0) {
		return true
	}
	if len(name) >= 2 && name[1] == ':' {
		return true
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return true
		}
	}
	return false
}

// readEntry reads at most max bytes of an entry; the header's size may lie.
func readEntry(f *zip.File, max int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > max {
		return nil, fmt.Errorf("uncompresses to more than the %d bytes allowed", max)
	}
	return body, nil
}
