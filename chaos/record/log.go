package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// line is one line of a holder's log.
type line struct {
	K  string    `json:"k"`            // "call", "ret", "start", "stop", "idcall", "idret"
	ID uint64    `json:"id,omitempty"` // matches a call with its return
	Op *Op       `json:"op,omitempty"`
	W  *Workload `json:"w,omitempty"`
	I  *IDOp     `json:"i,omitempty"`
}

// Log is an append-only file of records, written one line per write(2) so
// that a SIGKILL loses at most the record being made, never an earlier one.
// It is safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	f    *os.File
	next uint64
	err  error
}

// Create opens path for appending, creating it if needed.
func Create(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &Log{f: f}, nil
}

// Call records that op is being sent and returns the ID to pass to Return.
// Call it before the operation leaves the process.
func (l *Log) Call(op Op) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	l.write(line{K: "call", ID: l.next, Op: &op})
	return l.next
}

// Return records how the operation with id ended. Call it before the
// caller can act on the result.
func (l *Log) Return(id uint64, op Op) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.write(line{K: "ret", ID: id, Op: &op})
}

// IDCall records that a request-ID store call is being made and returns
// the ID to pass to IDReturn.
func (l *Log) IDCall(op IDOp) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	l.write(line{K: "idcall", ID: l.next, I: &op})
	return l.next
}

// IDReturn records how the request-ID store call with id ended.
func (l *Log) IDReturn(id uint64, op IDOp) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.write(line{K: "idret", ID: id, I: &op})
}

// Start records that a workload started.
func (l *Log) Start(w Workload) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.write(line{K: "start", W: &w})
}

// Stop records that a workload returned.
func (l *Log) Stop(w Workload) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.write(line{K: "stop", W: &w})
}

// Err returns the first write error, if any.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.err, l.f.Close())
}

// write appends one line. l.mu must be held.
func (l *Log) write(ln line) {
	b, err := json.Marshal(ln)
	if err == nil {
		_, err = l.f.Write(append(b, '\n'))
	}
	if err != nil && l.err == nil {
		l.err = err
	}
}

// ReadLog reads a log written by Log. An operation whose return was never
// written is given Return Never and ResultUnknown: it was in flight when the
// process died. A workload whose stop was never written keeps Stop Never. A
// truncated last line (a write cut by the end of the process) is ignored.
func ReadLog(path string) (History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return History{}, err
	}
	var (
		h       History
		calls   = map[uint64]int{} // ID -> index in h.Ops
		idCalls = map[uint64]int{} // ID -> index in h.IDOps
		running = map[Workload]int{}
	)
	lines := bytes.Split(b, []byte("\n"))
	for i, raw := range lines {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var ln line
		if err := json.Unmarshal(raw, &ln); err != nil {
			if i == len(lines)-1 {
				break // cut short by a kill
			}
			return h, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		switch {
		case ln.K == "call" && ln.Op != nil:
			op := *ln.Op
			op.Return, op.Result = Never, ResultUnknown
			calls[ln.ID] = len(h.Ops)
			h.Ops = append(h.Ops, op)
		case ln.K == "ret" && ln.Op != nil:
			if j, ok := calls[ln.ID]; ok {
				h.Ops[j] = *ln.Op
				delete(calls, ln.ID)
			} else {
				h.Ops = append(h.Ops, *ln.Op)
			}
		case ln.K == "idcall" && ln.I != nil:
			op := *ln.I
			op.Return = Never
			idCalls[ln.ID] = len(h.IDOps)
			h.IDOps = append(h.IDOps, op)
		case ln.K == "idret" && ln.I != nil:
			if j, ok := idCalls[ln.ID]; ok {
				h.IDOps[j] = *ln.I
				delete(idCalls, ln.ID)
			} else {
				h.IDOps = append(h.IDOps, *ln.I)
			}
		case ln.K == "start" && ln.W != nil:
			w := *ln.W
			w.Stop = Never
			running[key(w)] = len(h.Workloads)
			h.Workloads = append(h.Workloads, w)
		case ln.K == "stop" && ln.W != nil:
			if j, ok := running[key(*ln.W)]; ok {
				h.Workloads[j].Stop = ln.W.Stop
				delete(running, key(*ln.W))
			} else {
				h.Workloads = append(h.Workloads, *ln.W)
			}
		default:
			return h, fmt.Errorf("%s:%d: unknown record %q", path, i+1, ln.K)
		}
	}
	return h, nil
}

func key(w Workload) Workload {
	return Workload{Proc: w.Proc, Lease: w.Lease, Owner: w.Owner, Term: w.Term, Sup: w.Sup, Token: w.Token}
}

// ReadLogs reads every *.log file in dir with ReadLog and merges them.
func ReadLogs(dir string) (History, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return History{}, err
	}
	var h History
	for _, p := range paths {
		one, err := ReadLog(p)
		if err != nil {
			return h, err
		}
		h.Append(one)
	}
	return h, nil
}

// Tail follows a growing log and tells which operations are in flight,
// for a harness that wants to strike while one is. It is not safe for
// concurrent use.
type Tail struct {
	path    string
	off     int64
	partial []byte
	open    map[uint64]Op
}

// NewTail follows the log at path from its beginning.
func NewTail(path string) *Tail { return &Tail{path: path, open: map[uint64]Op{}} }

// InFlight reads what was appended since the last call and returns the
// operations called and not returned yet.
func (t *Tail) InFlight() ([]Op, error) {
	f, err := os.Open(t.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	t.off += int64(len(b))
	b = append(t.partial, b...)
	end := bytes.LastIndexByte(b, '\n')
	t.partial = append([]byte(nil), b[end+1:]...)
	for _, raw := range bytes.Split(b[:end+1], []byte("\n")) {
		var ln line
		if json.Unmarshal(raw, &ln) != nil {
			continue
		}
		switch {
		case ln.K == "call" && ln.Op != nil:
			t.open[ln.ID] = *ln.Op
		case ln.K == "ret":
			delete(t.open, ln.ID)
		}
	}
	out := make([]Op, 0, len(t.open))
	for _, op := range t.open {
		out = append(out, op)
	}
	return out, nil
}
