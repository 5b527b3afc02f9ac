package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/worldfs/worldfs/bucket"
	"github.com/worldfs/worldfs/bucket/local"
)

// Verified fragments. The catalog records each fragment's size, digest and
// (since format 3) the bucket's generation of the object. Content decides
// integrity; metadata is a fast path (docs/INTERNALS.md, "Verified fragments"): an
// object whose size and generation are the recorded ones is the object
// the writer created, so a check that reads no data may stop there; one
// whose generation differs but whose size matches (a bucket copied by any
// tool: cp -r, rsync without -t, a tar, a download of a GCS bucket, a
// bucket-to-bucket copy) is decided by the sha256 of its bytes, hashed
// once and then remembered (Verified). Only a different size, or bytes
// that hash to another digest, is damage. The rule is Record.checkStat;
// every reader (the views, the mount, worldfs check, the Iceberg export,
// world copy) checks through this file.

// ErrCorruptFragment: a fragment's bytes, size or generation differ from
// what the catalog recorded for it, or it is missing. Nothing was served
// from it. Test with errors.Is; CorruptFragmentError carries the details.
// It is marked corruption (bucket.ErrCorruption).
var ErrCorruptFragment = bucket.MarkCorruption(errors.New("fragment does not match the catalog"))

// CorruptFragmentError names the fragment and what differs.
type CorruptFragmentError struct {
	Name string // the bucket object
	File string // the local file that was checked ("": the bucket's bytes)
	What string // "size", "generation", "sha256" or "presence"
	Want string // what the catalog records
	Got  string // what was found
}

func (e *CorruptFragmentError) Error() string {
	where := e.Name
	if e.File != "" && !strings.HasSuffix(e.File, filepath.FromSlash(e.Name)) {
		where += " (local copy " + e.File + ")"
	}
	if e.What == "presence" {
		return fmt.Sprintf("fragment %s: %s, but the catalog records it: %v", where, e.Got, ErrCorruptFragment)
	}
	return fmt.Sprintf("fragment %s: %s is %s, the catalog records %s: %v", where, e.What, e.Got, e.Want, ErrCorruptFragment)
}

func (e *CorruptFragmentError) Unwrap() error { return ErrCorruptFragment }

// Record is what the catalog records of one fragment (index.Fragment). A
// zero field was not recorded and is not checked.
type Record struct {
	Name       string
	Size       int64
	Generation int64
	Digest     string // "sha256:<hex>"
}

// Recorded reports whether the catalog recorded anything to check.
func (r Record) Recorded() bool { return r.Size != 0 || r.Generation != 0 || r.Digest != "" }

// CheckAttrs checks an object's size and generation (as the bucket reports
// them) against r, by the rule of checkStat: moved means the bytes decide.
func (r Record) CheckAttrs(a bucket.Attrs) (moved bool, err error) {
	return r.checkStat("", a.Size, a.Generation)
}

// checkStat is the rule, in one place: a size other than the recorded one
// is damage; the recorded generation (or none recorded) is the fast path,
// the object the writer created; another generation with the recorded
// size is a copy or a rewrite, which the bytes decide (moved: the caller
// must hash them, or find them remembered). Only a record with no digest
// to decide by fails on the generation.
func (r Record) checkStat(file string, size, gen int64) (moved bool, err error) {
	if r.Size != 0 && size != r.Size {
		return false, &CorruptFragmentError{Name: r.Name, File: file, What: "size", Want: strconv.FormatInt(r.Size, 10) + " bytes",
			Got: strconv.FormatInt(size, 10) + " bytes"}
	}
	if r.Generation == 0 || gen == r.Generation {
		return false, nil
	}
	if r.Digest == "" {
		return false, &CorruptFragmentError{Name: r.Name, File: file, What: "generation", Want: strconv.FormatInt(r.Generation, 10),
			Got: strconv.FormatInt(gen, 10) + " (and no digest is recorded to decide by the bytes)"}
	}
	return true, nil
}

// CheckData checks data, the whole of r's object as read, against r: its
// size and its sha256.
func (r Record) CheckData(file string, data []byte) error {
	if r.Size != 0 && int64(len(data)) != r.Size {
		return r.CheckSize(file, int64(len(data)))
	}
	if r.Digest == "" {
		return nil
	}
	hashes.Add(1)
	sum := sha256.Sum256(data)
	return r.CheckDigest(file, sum[:])
}

// CheckDigest checks sum (a sha256) against r's digest.
func (r Record) CheckDigest(file string, sum []byte) error {
	got := "sha256:" + hex.EncodeToString(sum)
	if r.Digest != "" && got != r.Digest {
		return &CorruptFragmentError{Name: r.Name, File: file, What: "sha256", Want: r.Digest, Got: got}
	}
	return nil
}

func missing(r Record, file string) error {
	return &CorruptFragmentError{Name: r.Name, File: file, What: "presence", Want: "present", Got: "absent"}
}

// hashes counts files hashed by this process (HashCount).
var hashes atomic.Int64

// HashCount returns how many files this process has hashed to verify them:
// what the memory of verified files saves.
func HashCount() int64 { return hashes.Load() }

// HashFile returns the sha256 of f's bytes (read from offset 0).
func HashFile(f *os.File) ([]byte, error) {
	hashes.Add(1)
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// VerifiedPath returns a local copy of r's object in b, fetched on first use
// and verified as it is fetched: the object's size and generation and the
// sha256 of the bytes must be what r records, or the copy is not made and
// the error is a CorruptFragmentError. Verified copies are kept by digest,
// apart from unverified ones (Path), so a copy served here was always
// checked. A record without a digest is fetched by name (Path) and its
// size checked.
func (d *Disk) VerifiedPath(ctx context.Context, b bucket.Bucket, bucketID string, r Record) (string, error) {
	hexSum, ok := strings.CutPrefix(r.Digest, "sha256:")
	if !ok || len(hexSum) != 64 {
		p, err := d.Path(ctx, b, bucketID, r.Name)
		if err != nil {
			if errors.Is(err, bucket.ErrNotExist) {
				return "", missing(r, "")
			}
			return "", err
		}
		return p, checkCopy(r, p)
	}
	if err := bucket.ValidateName(r.Name); err != nil {
		return "", err
	}
	p := d.verifiedPath(r.Name, hexSum)
	p, err := d.produce(ctx, p, func(tmp string) error {
		data, attrs, err := b.Get(ctx, r.Name)
		if errors.Is(err, bucket.ErrNotExist) {
			return missing(r, "")
		}
		if err != nil {
			return err
		}
		attrs.Size = int64(len(data))
		if _, err := r.CheckAttrs(attrs); err != nil {
			return err
		}
		// The bytes decide, whatever the generation (a copied bucket).
		if err := r.CheckData("", data); err != nil {
			return err
		}
		return os.WriteFile(tmp, data, 0o644)
	})
	if err != nil {
		return "", err
	}
	return p, checkCopy(r, p)
}

// verifiedPath is where the verified copy of an object called name, of
// sha256 hexSum, is kept.
func (d *Disk) verifiedPath(name, hexSum string) string {
	file := hexSum
	if ext := filepath.Ext(name); ext != "" && !strings.ContainsAny(ext, `/\`) {
		file += ext
	}
	return filepath.Join(d.dir, "objects", "~sha256", hexSum[:2], file)
}

// HasVerified reports whether the cache holds a verified copy of r's
// object (VerifiedPath made it, in this process or another) of r's size,
// without fetching it or counting a lookup: a reader that can read part of
// an object by ranges reads the copy instead when there is one.
func (d *Disk) HasVerified(r Record) bool {
	hexSum, ok := strings.CutPrefix(r.Digest, "sha256:")
	if !ok || len(hexSum) != 64 || bucket.ValidateName(r.Name) != nil {
		return false
	}
	info, err := os.Stat(d.verifiedPath(r.Name, hexSum))
	return err == nil && info.Mode().IsRegular() && r.CheckSize("", info.Size()) == nil
}

// checkCopy checks a cached copy's size against r.
func checkCopy(r Record, p string) error {
	info, err := os.Stat(p)
	if err != nil {
		return err
	}
	return r.CheckSize(p, info.Size())
}

// CheckSize checks the size of file, a copy of r's object, against r.
func (r Record) CheckSize(file string, size int64) error {
	_, err := Record{Name: r.Name, Size: r.Size}.checkStat(file, size, 0)
	return err
}

// Dir returns the cache's directory.
func (d *Disk) Dir() string { return d.dir }

// Verified remembers the local bucket files whose sha256 was found to be
// their record's, so that a file is hashed once, not per query, in this
// process and in later ones: the memory is kept in a directory (one file
// per world), appended to as files are verified.
//
// An entry is the hash of the record (name, size, generation, digest) and
// of the file's identity: device, inode, size, modification and change
// times. Any change to the file in place, even one that restores its
// modification time, moves its change time, so the entry no longer
// matches and the file is hashed again. Whoever can write the memory's
// directory can make a changed file pass unhashed (an entry is easy to
// forge for a file one can stat): the directory is the user's own (mode
// 0700), like the cache, and `worldfs check --read-data` hashes every file
// whatever the memory says. A damaged memory file only costs hashing
// again: unreadable entries are dropped.
//
// The memory is bounded: files that compaction replaced or collection
// deleted are never looked up again, so once a world's memory holds more
// than MaxVerifiedRecords entries it is rewritten with only those this
// process found in use (looked up or verified), dropping the rest; a
// dropped file still in use is only hashed again.
type Verified struct {
	dir string
	max int
	mu  struct {
		sync.Mutex
		worlds map[string]map[key]struct{} // loaded sets, by world
		used   map[string]map[key]struct{} // the entries this process found in use, by world
	}
}

// MaxVerifiedRecords bounds the entries of a world's memory of verified
// files (16 bytes each).
const MaxVerifiedRecords = 1 << 20

type key [16]byte

// memoHeader starts every memory file (16 bytes, an entry's size).
const memoHeader = "worldfs-vset-v1\n"

// OpenVerified returns the memory of verified files kept in dir (made on
// first write).
func OpenVerified(dir string) *Verified {
	v := &Verified{dir: dir, max: MaxVerifiedRecords}
	v.mu.worlds = map[string]map[key]struct{}{}
	v.mu.used = map[string]map[key]struct{}{}
	return v
}

// fileKey is the entry for a file with info holding r's object.
func fileKey(r Record, info os.FileInfo) key {
	var ino, dev, ctime uint64
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		ino, dev = st.Ino, uint64(st.Dev)
		ctime = uint64(st.Ctim.Sec)*1e9 + uint64(st.Ctim.Nsec)
	}
	h := sha256.New()
	b := recordKey(r)
	b = binary.AppendUvarint(b, dev)
	b = binary.AppendUvarint(b, ino)
	b = binary.AppendVarint(b, info.Size())
	b = binary.AppendVarint(b, info.ModTime().UnixNano())
	b = binary.AppendUvarint(b, ctime)
	h.Write(b)
	var k key
	copy(k[:], h.Sum(nil))
	return k
}

// recordKey encodes r, the start of every entry's hashed text.
func recordKey(r Record) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(r.Name)))
	b = append(b, r.Name...)
	b = binary.AppendVarint(b, r.Size)
	b = binary.AppendVarint(b, r.Generation)
	b = binary.AppendUvarint(b, uint64(len(r.Digest)))
	b = append(b, r.Digest...)
	return b
}

// objectKey is the entry for the object of a remote bucket (bucketID, as
// the cache names it) at a.Generation holding r's object. A remote
// bucket's generation names one immutable incarnation of the object (any
// write makes a new one), so it identifies the bytes as a file's inode and
// times do.
func objectKey(bucketID string, r Record, a bucket.Attrs) key {
	b := append([]byte("object\x00"), recordKey(r)...)
	b = binary.AppendUvarint(b, uint64(len(bucketID)))
	b = append(b, bucketID...)
	b = binary.AppendVarint(b, a.Generation)
	b = binary.AppendVarint(b, a.Size)
	var k key
	sum := sha256.Sum256(b)
	copy(k[:], sum[:])
	return k
}

// worldOf returns the world a fragment name belongs to (data/<world>/…).
func worldOf(name string) string {
	parts := strings.SplitN(name, "/", 3)
	if len(parts) < 3 {
		return "_"
	}
	return parts[1]
}

func (v *Verified) memoPath(world string) string {
	sum := sha256.Sum256([]byte(world))
	return filepath.Join(v.dir, hex.EncodeToString(sum[:12]))
}

// set returns world's set, loading it on first use. Called with v.mu held.
func (v *Verified) set(world string) map[key]struct{} {
	if s, ok := v.mu.worlds[world]; ok {
		return s
	}
	s := map[key]struct{}{}
	v.mu.worlds[world] = s
	data, err := os.ReadFile(v.memoPath(world))
	if err != nil || !bytes.HasPrefix(data, []byte(memoHeader)) {
		return s
	}
	body := data[len(memoHeader):]
	whole := len(body) / len(key{}) * len(key{})
	for i := 0; i < whole; i += len(key{}) {
		s[key(body[i:i+len(key{})])] = struct{}{}
	}
	if whole != len(body) { // a torn append: rewrite what is whole
		_ = v.rewrite(world, data[:len(memoHeader)+whole])
	}
	return s
}

func (v *Verified) rewrite(world string, data []byte) error {
	p := v.memoPath(world)
	tmp := fmt.Sprintf("%s.tmp-%d", p, os.Getpid())
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func (v *Verified) has(r Record, info os.FileInfo) bool { return v.hasKey(r, fileKey(r, info)) }

func (v *Verified) hasKey(r Record, k key) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	w := worldOf(r.Name)
	_, ok := v.set(w)[k]
	if ok {
		v.use(w, k)
	}
	return ok
}

// use marks k an entry of world's in use. Called with v.mu held.
func (v *Verified) use(world string, k key) {
	u := v.mu.used[world]
	if u == nil {
		u = map[key]struct{}{}
		v.mu.used[world] = u
	}
	u[k] = struct{}{}
}

// remember adds entries for files found whole and appends them to the
// worlds' memory files (a failure to write only means hashing again).
func (v *Verified) remember(entries []entryOf) {
	v.mu.Lock()
	defer v.mu.Unlock()
	byWorld := map[string][]byte{}
	for _, e := range entries {
		w, k := worldOf(e.r.Name), e.k
		s := v.set(w)
		v.use(w, k)
		if _, ok := s[k]; ok {
			continue
		}
		s[k] = struct{}{}
		byWorld[w] = append(byWorld[w], k[:]...)
	}
	if len(byWorld) == 0 {
		return
	}
	if err := os.MkdirAll(v.dir, 0o700); err != nil {
		return
	}
	for w, add := range byWorld {
		if len(v.mu.worlds[w]) > v.max {
			// Too many: keep only the entries in use (see Verified).
			used := v.mu.used[w]
			data := make([]byte, 0, len(memoHeader)+len(used)*len(key{}))
			data = append(data, memoHeader...)
			kept := make(map[key]struct{}, len(used))
			for k := range used {
				data = append(data, k[:]...)
				kept[k] = struct{}{}
			}
			v.mu.worlds[w] = kept
			_ = v.rewrite(w, data)
			continue
		}
		p := v.memoPath(w)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			continue
		}
		if info, err := f.Stat(); err == nil && info.Size() == 0 {
			add = append([]byte(memoHeader), add...)
		}
		// One write per batch: O_APPEND writes do not interleave.
		_, _ = f.Write(add)
		f.Close()
	}
}

type entryOf struct {
	r Record
	k key // fileKey or objectKey
}

// CheckOpen checks f, a bucket file opened in place that holds r's object,
// against r: its size (and, with no digest recorded, its generation)
// always, the sha256 unless this very file was found whole before (then
// it is remembered). A file copied with new times is hashed once, as any
// file first read.
func (v *Verified) CheckOpen(f *os.File, r Record) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if _, err := r.checkStat(f.Name(), info.Size(), local.Generation(info)); err != nil {
		return err
	}
	if r.Digest == "" || v.has(r, info) {
		return nil
	}
	sum, err := HashFile(f)
	if err != nil {
		return fmt.Errorf("verifying fragment %s: %w", r.Name, err)
	}
	if err := r.CheckDigest(f.Name(), sum); err != nil {
		return err
	}
	v.remember([]entryOf{{r, fileKey(r, info)}})
	return nil
}

// Batch checks many bucket files read in place (the files of a world's
// views): Add checks size and generation at once, Wait hashes the files not
// remembered, in parallel, and remembers them.
type Batch struct {
	v       *Verified
	pending []pendingFile
}

type pendingFile struct {
	path string
	r    Record
	info os.FileInfo
}

// Batch starts a batch of checks.
func (v *Verified) Batch() *Batch { return &Batch{v: v} }

// Add checks the file at path, which holds r's object in place, by size
// and generation now, and queues its sha256 unless remembered.
func (b *Batch) Add(path string, r Record) error {
	if !r.Recorded() {
		return nil
	}
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return missing(r, path)
	}
	if err != nil {
		return err
	}
	if _, err := r.checkStat(path, info.Size(), local.Generation(info)); err != nil {
		return err
	}
	if r.Digest != "" && !b.v.has(r, info) {
		b.pending = append(b.pending, pendingFile{path, r, info})
	}
	return nil
}

// Wait hashes the queued files (on every core) and remembers those found
// whole; the first mismatch is the error.
func (b *Batch) Wait(ctx context.Context) error {
	ok := make([]bool, len(b.pending))
	errs := make([]error, len(b.pending))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i, p := range b.pending {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if failed.Load() {
				return
			}
			if errs[i] = hash(ctx, p, &b.pending[i].info); errs[i] != nil {
				failed.Store(true)
			} else {
				ok[i] = true
			}
		}()
	}
	wg.Wait()
	var found []entryOf
	for i, p := range b.pending {
		if ok[i] {
			found = append(found, entryOf{p.r, fileKey(p.r, p.info)})
		}
	}
	b.v.remember(found)
	b.pending = nil
	return errors.Join(errs...)
}

// hash checks the sha256 of the file p names; info is updated if the file
// was replaced since it was queued (and passes the size and generation
// check as it is now).
func hash(ctx context.Context, p pendingFile, info *os.FileInfo) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.Open(p.path)
	if err != nil {
		return err
	}
	defer f.Close()
	now, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(now, p.info) || !now.ModTime().Equal(p.info.ModTime()) || now.Size() != p.info.Size() {
		// Replaced since it was queued: check it as it is now.
		if _, err := p.r.checkStat(p.path, now.Size(), local.Generation(now)); err != nil {
			return err
		}
	}
	*info = now
	sum, err := HashFile(f)
	if err != nil {
		return fmt.Errorf("verifying fragment %s: %w", p.r.Name, err)
	}
	return p.r.CheckDigest(p.path, sum)
}
