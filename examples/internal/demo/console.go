//go:build unix

package demo

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Console writes log lines and, on a terminal, keeps a live status line
// below them: every line first clears the status line, then redraws it.
// It is an io.Writer for loggers; lines written through it stay whole.
type Console struct {
	mu     sync.Mutex
	w      io.Writer
	live   bool          // draw the status line
	width  func() int    // terminal columns
	status func() string // the status line's text
	drawn  bool
	buf    []byte // a partial line
}

func NewConsole(w io.Writer, live bool, width func() int) *Console {
	return &Console{w: w, live: live, width: width}
}

// Write writes the complete lines of p (a logger writes one record at a
// time) and keeps a partial line until its end arrives.
func (c *Console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			break
		}
		c.lineLocked(string(c.buf[:i]))
		c.buf = c.buf[i+1:]
	}
	return len(p), nil
}

// Println writes one line.
func (c *Console) Println(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		c.lineLocked(l)
	}
}

func (c *Console) lineLocked(s string) {
	c.clearLocked()
	_, _ = io.WriteString(c.w, s+"\n")
	c.drawLocked()
}

func (c *Console) clearLocked() {
	if c.drawn {
		_, _ = io.WriteString(c.w, "\r\x1b[K")
		c.drawn = false
	}
}

func (c *Console) drawLocked() {
	if !c.live || c.status == nil {
		return
	}
	s := c.status()
	if w := c.width(); w > 1 && utf8.RuneCountInString(s) > w-1 {
		r := []rune(s)
		s = string(r[:w-2]) + "…"
	}
	_, _ = io.WriteString(c.w, "\x1b[7m"+s+"\x1b[0m")
	c.drawn = true
}

// Redraw redraws the status line.
func (c *Console) Redraw() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
	c.drawLocked()
}

// SetStatus starts drawing status (on a terminal).
func (c *Console) SetStatus(status func() string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status = status
}

// Close clears the status line and flushes a partial line; later writes
// have no status line.
func (c *Console) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clearLocked()
	c.live = false
	if len(c.buf) > 0 {
		_, _ = io.WriteString(c.w, string(c.buf)+"\n")
		c.buf = nil
	}
}

// Tick redraws the status line every interval until stop is closed.
func (c *Console) Tick(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			c.Redraw()
		}
	}
}

// NewPrefixWriter returns a writer that prints each line to c behind prefix.
func NewPrefixWriter(c *Console, prefix string) *PrefixWriter {
	return &PrefixWriter{c: c, prefix: prefix}
}

// PrefixWriter writes the lines of one child process to the console, each
// behind the child's (coloured) name.
type PrefixWriter struct {
	c      *Console
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (p *PrefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.c.Println(p.prefix + string(p.buf[:i]))
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// flush writes a partial last line.
func (p *PrefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		p.c.Println(p.prefix + string(p.buf))
		p.buf = nil
	}
}

// EndOfTime stands for "not yet": the end of an interval that has not
// ended.
var EndOfTime = time.Unix(1<<62, 0)
