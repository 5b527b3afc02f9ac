package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/index"
)

// AssetRef references an external artifact by content (docs/ARCHITECTURE.md): the
// sha256 digest is its identity; the uri is a hint that may rot.
type AssetRef struct {
	Digest    string `json:"digest"` // "sha256:<64 hex>"
	URI       string `json:"uri,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Size      int64  `json:"size"`
}

// ErrBadAssetDigest: an asset digest is not "sha256:" and 64 lowercase hex
// digits.
var ErrBadAssetDigest = errors.New(`an asset digest must be "sha256:" followed by 64 lowercase hex digits`)

// ErrAssetMismatch: an asset's bytes do not hash to its reference's
// digest.
var ErrAssetMismatch = bucket.MarkCorruption(errors.New("asset bytes do not match their digest"))

func validAssetDigest(d string) bool {
	const prefix = "sha256:"
	if len(d) != len(prefix)+64 || d[:len(prefix)] != prefix {
		return false
	}
	for _, c := range d[len(prefix):] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// AssetPath is where the content-addressed store keeps an asset.
func AssetPath(digest string) (string, error) {
	if !validAssetDigest(digest) {
		return "", fmt.Errorf("asset %q: %w", digest, ErrBadAssetDigest)
	}
	return index.AssetPath(digest[len("sha256:"):]), nil
}

// DigestFile returns the sha256 digest and size of the file at path,
// streaming it.
func DigestFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("digesting %s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), n, nil
}

// AssetRefForFile builds the reference of the file at path, its uri a
// file:// URL of its absolute path.
func AssetRefForFile(path, mediaType string) (AssetRef, error) {
	d, n, err := DigestFile(path)
	if err != nil {
		return AssetRef{}, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return AssetRef{}, err
	}
	return AssetRef{Digest: d, URI: "file://" + abs, MediaType: mediaType, Size: n}, nil
}

// PutAsset stores data in b's content-addressed asset store
// (assets/sha256/<hex>, create-if-absent: storing the same bytes twice is
// a no-op) and returns its reference, the uri naming the stored copy.
func PutAsset(ctx context.Context, b bucket.Bucket, data []byte, mediaType string) (AssetRef, error) {
	sum := sha256.Sum256(data)
	ref := AssetRef{Digest: "sha256:" + hex.EncodeToString(sum[:]), MediaType: mediaType, Size: int64(len(data))}
	path, _ := AssetPath(ref.Digest)
	if _, err := bucket.CreateOnce(ctx, b, path, data); err != nil && !errors.Is(err, bucket.ErrExist) {
		return AssetRef{}, fmt.Errorf("storing asset %s: %w", ref.Digest, err)
	}
	ref.URI = "worldfs:" + path
	return ref, nil
}

// PutAssetFile stores the file at path (PutAsset).
func PutAssetFile(ctx context.Context, b bucket.Bucket, path, mediaType string) (AssetRef, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return AssetRef{}, err
	}
	return PutAsset(ctx, b, data, mediaType)
}

// GetAsset reads an asset from the store and checks its bytes against the
// reference's digest.
func GetAsset(ctx context.Context, b bucket.Bucket, ref AssetRef) ([]byte, error) {
	path, err := AssetPath(ref.Digest)
	if err != nil {
		return nil, err
	}
	data, _, err := b.Get(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("asset %s: %w", ref.Digest, err)
	}
	sum := sha256.Sum256(data)
	if "sha256:"+hex.EncodeToString(sum[:]) != ref.Digest {
		return nil, fmt.Errorf("asset %s at %s: %w", ref.Digest, path, ErrAssetMismatch)
	}
	return data, nil
}
