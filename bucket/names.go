package bucket

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

const (
	// MaxNameLen is the longest object name in bytes (GCS's own limit).
	MaxNameLen = 1024
	// MaxSegmentLen is the longest slash-separated segment in bytes, so
	// that every name maps onto a local file system.
	MaxSegmentLen = 255
	// ReservedPrefix is the first segment no object name may use; the local
	// backend keeps its temporary files and locks there.
	ReservedPrefix = ".worldfs"
)

// NameError says which name was refused and why. It matches ErrInvalidName.
type NameError struct {
	Name   string
	Reason string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("invalid object name %q: %s", e.Name, e.Reason)
}

func (e *NameError) Is(target error) bool { return target == ErrInvalidName }

// ValidateName checks an object name: non-empty, at most MaxNameLen bytes of
// valid UTF-8 without control characters, relative (no leading slash), no
// trailing slash, no empty, "." or ".." segment, no segment over
// MaxSegmentLen bytes, and not under ReservedPrefix. A valid name can never
// address anything outside a bucket's root.
func ValidateName(name string) error {
	if name == "" {
		return &NameError{name, "empty"}
	}
	if strings.HasSuffix(name, "/") {
		return &NameError{name, "ends with a slash"}
	}
	return validatePath(name, name)
}

// ValidatePrefix checks a listing prefix: like a name, except that it may be
// empty, may end with a slash, and its last segment may be partial.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := checkBytes(prefix, prefix); err != nil {
		return err
	}
	if strings.HasPrefix(prefix, "/") {
		return &NameError{prefix, "absolute (starts with a slash)"}
	}
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return nil
	}
	return validatePath(prefix, prefix[:i])
}

func validatePath(name, path string) error {
	if err := checkBytes(name, path); err != nil {
		return err
	}
	if strings.HasPrefix(path, "/") {
		return &NameError{name, "absolute (starts with a slash)"}
	}
	for i, seg := range strings.Split(path, "/") {
		switch {
		case seg == "":
			return &NameError{name, "empty segment (double slash)"}
		case seg == "." || seg == "..":
			return &NameError{name, fmt.Sprintf("segment %q", seg)}
		case len(seg) > MaxSegmentLen:
			return &NameError{name, fmt.Sprintf("segment longer than %d bytes", MaxSegmentLen)}
		case i == 0 && seg == ReservedPrefix:
			return &NameError{name, fmt.Sprintf("%q is reserved", ReservedPrefix)}
		}
	}
	return nil
}

func checkBytes(name, s string) error {
	if len(s) > MaxNameLen {
		return &NameError{name[:32] + "…", fmt.Sprintf("longer than %d bytes", MaxNameLen)}
	}
	if !utf8.ValidString(s) {
		return &NameError{name, "not valid UTF-8"}
	}
	for _, r := range s {
		if r == 0 {
			return &NameError{name, "contains NUL"}
		}
		if r < 0x20 || r == 0x7f {
			return &NameError{name, fmt.Sprintf("contains control character %U", r)}
		}
	}
	return nil
}
