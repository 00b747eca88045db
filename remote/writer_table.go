package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The writer table beside a checkpoint.
//
// A checkpoint's file (Table.CheckpointFile) holds the table; the file
// WriterTableFile(path) beside it holds every writer's highest stored
// sequence number as it was just before the checkpoint began, so a
// server restored from the checkpoint (ServerOptions.Writers) still
// acknowledges as duplicates the resent batches the checkpoint holds.
// Read before the buffer's copy, each writer's number covers only batches
// whose items were stored before the copy began, so a batch it covers is
// in the checkpoint (or was evicted by later inserts, as it would have
// been in the running server): a restore never refuses a batch it lacks.
// A batch stored while the checkpoint was copied is not covered, and is
// stored again if resent (a duplicate, never a loss).
//
// The pair is not renamed into place atomically: Checkpoint removes the
// previous table file before it renames the new checkpoint over the old
// one, and writes the new table after. A crash in between leaves a
// checkpoint without a table (a restore then stores resent batches
// again, as it would without tables at all), never a table newer than
// its checkpoint.

// writerTableVersion is the table file's format version.
const writerTableVersion = 1

// writerTableFile is the table file's JSON.
type writerTableFile struct {
	Version int               `json:"version"`
	Writers map[string]uint64 `json:"writers"`
}

// WriterTableFile is the name of the writer table file beside the
// checkpoint at path: path + ".writers". O(1).
func WriterTableFile(path string) string { return path + ".writers" }

// ReadWriterTable reads the writer table beside the checkpoint at path
// (WriterTableFile): each writer id's highest sequence number stored
// when the checkpoint began, for ServerOptions.Writers. A checkpoint
// without a table file (written before tables existed, or by a
// checkpoint a crash interrupted) gives nil and no error. Errors: an
// unreadable or malformed file. Cost: O(file size).
func ReadWriterTable(path string) (map[string]uint64, error) {
	data, err := os.ReadFile(WriterTableFile(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remote: writer table: %w", err)
	}
	var f writerTableFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("remote: writer table %s: %w", WriterTableFile(path), err)
	}
	if f.Version != writerTableVersion {
		return nil, fmt.Errorf("remote: writer table %s: version %d, this binary reads %d", WriterTableFile(path), f.Version, writerTableVersion)
	}
	return f.Writers, nil
}

// writerTable copies every writer's highest stored seq. O(writers) under
// the table's lock; it waits for no insert.
func (s *Server) writerTable() map[string]uint64 {
	s.writersMu.Lock()
	defer s.writersMu.Unlock()
	out := make(map[string]uint64, len(s.writers))
	for name, w := range s.writers {
		if h := w.high.Load(); h > 0 {
			out[name] = h
		}
	}
	return out
}

// writeWriterTable writes table to WriterTableFile(path) through a
// temporary file renamed over it, synced.
func writeWriterTable(path string, table map[string]uint64) error {
	data, err := json.Marshal(writerTableFile{Version: writerTableVersion, Writers: table})
	if err != nil {
		return err
	}
	dst := WriterTableFile(path)
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writer table: %w", err)
	}
	return nil
}
