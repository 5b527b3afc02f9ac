// Package progress draws how far a long command has got (check,
// optimize, gc, copy, bench set-up) as one redrawn line on a terminal,
// and nothing in a pipe or a log.
package progress

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Line shows how far long work has got (check, optimize, gc, bench
// set-up) as one redrawn line on a terminal, and nothing at all in a pipe
// or a log, so a command's output is the same wherever it goes. The bar
// is drawn by the progressbar library.
type Line struct {
	w     io.Writer // nil: not a terminal, draw nothing
	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	desc  string
	total int64
	ended bool // done was called: later steps draw nothing
}

// New draws on f if f is a terminal.
func New(f *os.File) *Line {
	if !terminal(f) {
		return &Line{}
	}
	return &Line{w: f}
}

// Step shows done of total under desc (total -1: not known, only the
// count is shown). A new total starts a new bar. Safe to call from
// several goroutines.
func (p *Line) Step(desc string, done, total int64) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if p.bar == nil || total != p.total {
		if p.bar != nil {
			p.bar.Clear()
		}
		p.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionUseANSICodes(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetSpinnerChangeInterval(0), // redrawn by step, no goroutine
		)
		p.desc, p.total = desc, total
	} else if desc != p.desc {
		p.bar.Describe(desc)
		p.desc = desc
	}
	p.bar.Set64(done)
}

// Clear clears the line so the command can print one of its own; the next
// step draws the bar again.
func (p *Line) Clear() {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Clear()
	}
}

// Done clears the line; the command's own output follows on a clean line.
func (p *Line) Done() {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	if p.bar != nil {
		p.bar.Exit()
		p.bar.Clear()
		p.bar = nil
	}
}

// terminal reports whether f is a terminal: progress is shown there, never
// in pipes or logs.
func terminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
