package local

import (
	"os"
	"sync"
)

// dirSyncs shares directory fsyncs between concurrent callers (group
// commit). A caller that needs a directory's entries durable, say after
// linking an object into it, needs an fsync of the directory that began
// after its change: one already running may have read the directory
// before the change. So a caller that finds no fsync of the directory
// running starts one; a caller that finds one running waits for it to end
// and for the next, which every caller that arrived meanwhile shares. The
// fsyncs of one directory run one at a time. A tick's fragments of one
// table, created by several ticks in flight at once, so cost one
// directory fsync between them rather than one each.
type dirSyncs struct {
	// fsync and onWait are set by this package's tests only, before the
	// bucket is used: fsync replaces (*os.File).Sync for every file and
	// directory the bucket syncs (nil: (*os.File).Sync); onWait is called
	// when a caller starts waiting for a round that another caller runs.
	fsync  func(*os.File) error
	onWait func(dir string)

	mu   sync.Mutex
	dirs map[string]*dirSync
}

// dirSync is the state of one directory's fsyncs. Rounds are numbered
// from 1 in the order they start.
type dirSync struct {
	users    int  // callers in sync on this directory (the entry is dropped at 0)
	running  bool // round started is in progress
	started  int  // the newest round started
	finished int  // the newest round finished
	failed   int  // the newest round that failed (0: none)
	err      error
	cond     sync.Cond
}

// sync makes dir's entries durable as of the call: it returns once an
// fsync of dir that began after the call has ended. The error is that of
// any round from the first such one on that failed.
func (s *dirSyncs) sync(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dirs[dir]
	if d == nil {
		if s.dirs == nil {
			s.dirs = make(map[string]*dirSync)
		}
		d = &dirSync{}
		d.cond.L = &s.mu
		s.dirs[dir] = d
	}
	d.users++
	defer func() {
		if d.users--; d.users == 0 {
			delete(s.dirs, dir)
		}
	}()
	need := d.started + 1 // the first round to begin after this call
	waited := false
	for d.finished < need {
		if d.running {
			if !waited && s.onWait != nil {
				s.onWait(dir)
			}
			waited = true
			d.cond.Wait()
			continue
		}
		d.running = true
		d.started++
		round := d.started
		s.mu.Unlock()
		err := s.syncDir(dir)
		s.mu.Lock()
		d.running, d.finished = false, round
		if err != nil {
			d.failed, d.err = round, err
		}
		d.cond.Broadcast()
	}
	if d.failed >= need {
		return d.err
	}
	return nil
}

func (s *dirSyncs) syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = s.fsyncFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// fsyncFile is f.Sync, or the tests' fsync.
func (s *dirSyncs) fsyncFile(f *os.File) error {
	if s.fsync != nil {
		return s.fsync(f)
	}
	return f.Sync()
}
