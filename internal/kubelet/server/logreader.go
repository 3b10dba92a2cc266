package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/utils/clock"
)

// The CRI log format, one record a line:
//
//	<RFC3339Nano time> <stdout|stderr> <tag>[:<tag>...] <content>
//
// where the first tag is F (the content ends a line) or P (a partial line,
// continued by the next record). The reader writes the content only, as
// upstream's kubelet does, optionally prefixed at the start of each line
// with the record's time.

// criRecord is one parsed line of a CRI log.
type criRecord struct {
	time    time.Time
	stream  string
	partial bool
	content []byte // including the newline of a full record
}

var errBadRecord = errors.New("not a CRI log record")

// parseCRIRecord parses one line (with its newline, if any).
func parseCRIRecord(line []byte) (criRecord, error) {
	var r criRecord
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return r, errBadRecord
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, fmt.Errorf("%w: time: %v", errBadRecord, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != "stdout" && string(stream) != "stderr") {
		return r, fmt.Errorf("%w: stream %q", errBadRecord, stream)
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		// "<time> <stream> F\n": an empty line.
		tags, content = bytes.TrimSuffix(rest, []byte{'\n'}), []byte{'\n'}
	}
	first, _, _ := bytes.Cut(tags, []byte{':'})
	r.time, r.stream, r.partial = t, string(stream), string(first) == "P"
	if r.partial {
		content = bytes.TrimSuffix(content, []byte{'\n'})
	} else if len(content) == 0 || content[len(content)-1] != '\n' {
		content = append(content, '\n')
	}
	r.content = content
	return r, nil
}

// readOptions say what part of a log to write and how.
type readOptions struct {
	tailLines  *int64
	limitBytes *int64
	since      time.Time
	follow     bool
	timestamps bool
}

// logWriter applies since, timestamps and the byte limit.
type logWriter struct {
	out       io.Writer
	opts      readOptions
	remain    int64
	lineStart bool
}

var errLimitReached = errors.New("byte limit reached")

func (w *logWriter) write(r criRecord) error {
	if r.time.Before(w.opts.since) {
		return nil
	}
	line := r.content
	if w.opts.timestamps && w.lineStart {
		line = append([]byte(r.time.Format("2006-01-02T15:04:05.000000000Z07:00")+" "), line...)
	}
	w.lineStart = !r.partial
	if w.opts.limitBytes != nil && int64(len(line)) > w.remain {
		line = line[:w.remain]
	}
	n, err := w.out.Write(line)
	w.remain -= int64(n)
	if err != nil {
		return err
	}
	if w.opts.limitBytes != nil && w.remain <= 0 {
		return errLimitReached
	}
	return nil
}

// tailStart is the offset of the n-th line from the end of f (0 when the
// file has fewer lines).
func tailStart(f io.ReadSeeker, n int64) (int64, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	const block = 4096
	buf := make([]byte, block)
	pos := size
	var seen int64
	for pos > 0 {
		read := int64(block)
		if pos < read {
			read = pos
		}
		pos -= read
		if _, err := f.Seek(pos, io.SeekStart); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(f, buf[:read]); err != nil {
			return 0, err
		}
		for i := read - 1; i >= 0; i-- {
			if buf[i] != '\n' || pos+i == size-1 {
				continue
			}
			seen++
			if seen == n {
				return pos + i + 1, nil
			}
		}
	}
	return 0, nil
}

// followPoll is how often a followed log is checked for growth and
// rotation; runningCheck how often the container's state is.
const (
	followPoll   = 100 * time.Millisecond
	runningCheck = time.Second
)

// readCRILog writes the log at path. With follow it keeps reading as the
// file grows, moves to the new file when the log is rotated (the path
// names another file) after draining the old one, and returns once the
// container is no longer running and the file is drained, or ctx ends.
func readCRILog(ctx context.Context, path string, opts readOptions, running func(context.Context) bool, clk clock.WithTicker, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("failed to open log file %q: %w", path, err)
	}
	defer func() { f.Close() }()
	if opts.tailLines != nil {
		start, err := tailStart(f, *opts.tailLines)
		if err != nil {
			return fmt.Errorf("failed to tail log file %q: %w", path, err)
		}
		if *opts.tailLines == 0 {
			if !opts.follow {
				return nil
			}
			start, _ = f.Seek(0, io.SeekEnd)
		}
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return err
		}
	}
	w := &logWriter{out: out, opts: opts, lineStart: true}
	if opts.limitBytes != nil {
		w.remain = *opts.limitBytes
	}
	r := bufio.NewReader(f)
	var pending []byte // an unterminated last line, completed by a later read
	var ticker clock.Ticker
	var lastCheck time.Time
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' && err == io.EOF && opts.follow {
				pending = append(pending, line...)
			} else {
				line = append(pending, line...)
				pending = nil
				if rec, perr := parseCRIRecord(line); perr == nil {
					if werr := w.write(rec); werr != nil {
						if errors.Is(werr, errLimitReached) {
							return nil
						}
						return werr
					}
				}
			}
		}
		if err == nil {
			continue
		}
		if err != io.EOF {
			return fmt.Errorf("failed to read log file %q: %w", path, err)
		}
		if !opts.follow {
			if len(pending) > 0 {
				if rec, perr := parseCRIRecord(pending); perr == nil {
					_ = w.write(rec)
				}
			}
			return nil
		}
		// At the end of the file: rotated, stopped, or wait for more.
		if rotated(f, path) {
			nf, err := os.Open(path)
			if err == nil {
				f.Close()
				f, r, pending = nf, bufio.NewReader(nf), nil
				continue
			}
			// Between the rename and the runtime's reopen: wait.
		}
		if now := clk.Now(); now.Sub(lastCheck) >= runningCheck {
			lastCheck = now
			if !running(ctx) {
				opts.follow = false // drain what is left, then stop
				continue
			}
		}
		if ticker == nil {
			ticker = clk.NewTicker(followPoll)
			defer ticker.Stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// rotated tells whether path now names a file other than f.
func rotated(f *os.File, path string) bool {
	cur, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	if err != nil {
		return false
	}
	return !os.SameFile(cur, now)
}
