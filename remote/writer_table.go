package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	replayv1 "github.com/apexrl/apex/api/replay/v1"
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
// Beside each seq the table (format version 2) keeps the counts of what
// was stored under the id, taken with the seq under the writer's lock
// (so they count exactly the batches the seq covers, which are in the
// checkpoint), and the batches stored while the checkpoint was copied,
// counted apart as uncertain (each is in the checkpoint or not: the copy
// goes stripe by stripe; a batch whose buffer insert had begun but whose
// record had not yet been made when the copy ended counts there too, as
// it may be in the copy). A restored server goes on counting from them,
// so its Info (WriterPage) counts, per writer id, what its lineage
// stored and kept: a writer's acknowledged items beyond that count were
// lost. The table also carries the number of writers evicted (their
// counts with them) and whether the counts are partial: a version-1
// table, which this binary still reads, has seqs only, so its writers
// restore with counts of zero and the table says its counts are partial
// (as does a restore from a checkpoint without a table), from then on.
// The table also keeps the server's data lineage (Server.Lineage), which
// a restore takes back, so a shard keeps its identity across restarts.
//
// Compatibility: a binary from before version 2 reads version 1 only,
// so it refuses a version-2 table ("version 2, this binary reads 1"), and
// with it the restore. To roll back to such a binary, remove the table
// file (the checkpoint then restores without it: resent batches it holds
// are stored again) or rewrite it as version 1, each id's high alone:
// {"version":1,"writers":{"<id>":<high>,...}}.
//
// The pair is not renamed into place atomically: Checkpoint removes the
// previous table file before it renames the new checkpoint over the old
// one, and writes the new table after. A crash in between leaves a
// checkpoint without a table (a restore then stores resent batches
// again, as it would without tables at all), never a table newer than
// its checkpoint.

// writerTableVersion is the table file's format version; version 1
// (seqs only) is read too.
const writerTableVersion = 2

// WriterRecord is one writer's entry in a writer table.
type WriterRecord struct {
	// High is the highest sequence number stored under the id.
	High uint64 `json:"high"`
	// Items and Batches count what was stored under the id up to High,
	// restores included.
	Items   uint64 `json:"items"`
	Batches uint64 `json:"batches"`
	// UncertainItems and UncertainBatches count the batches stored while
	// a checkpoint was copied (in it or not), not in Items and Batches.
	UncertainItems   uint64 `json:"uncertain_items,omitempty"`
	UncertainBatches uint64 `json:"uncertain_batches,omitempty"`
}

// WriterTable is a writer table as a checkpoint keeps it.
type WriterTable struct {
	// Writers maps each writer id to its record.
	Writers map[string]WriterRecord
	// Evicted counts the writers the table forgot (WriterIdle), their
	// counts with them, over the table's life.
	Evicted uint64
	// CountsPartial says the counts miss batches a restored checkpoint
	// held (a version-1 table or none was restored at some point).
	CountsPartial bool
	// Skipped counts the entries ReadWriterTable dropped from a
	// version-1 file because their ids are not writer ids an insert
	// accepts (empty or over MaxWriterName bytes): a version-1 server
	// restored them unchecked from a table given to it, and wrote them
	// back, but no writer can send under such an id, so they cover no
	// batch (a version-1 entry has no counts to lose). Not written.
	Skipped int
	// Lineage is the data lineage of the server that wrote the table
	// (Server.Lineage), which a server restored from it keeps; 0 in a
	// version-1 table or one written before lineages (a restore then
	// starts a new lineage: safe, see Server.Lineage).
	Lineage uint64
}

// writerTableFile is the table file's JSON (version 2).
type writerTableFile struct {
	Version       int                     `json:"version"`
	Evicted       uint64                  `json:"evicted,omitempty"`
	CountsPartial bool                    `json:"counts_partial,omitempty"`
	Lineage       uint64                  `json:"lineage,string,omitempty"` // additive: older version-2 readers ignore it
	Writers       map[string]WriterRecord `json:"writers"`
}

// writerTableFileV1 is a version-1 table file: seqs only.
type writerTableFileV1 struct {
	Writers map[string]uint64 `json:"writers"`
}

// WriterTableFile is the name of the writer table file beside the
// checkpoint at path: path + ".writers". O(1).
func WriterTableFile(path string) string { return path + ".writers" }

// ReadWriterTable reads the writer table beside the checkpoint at path
// (WriterTableFile), for ServerOptions.Writers: each writer id's highest
// sequence number stored when the checkpoint began, with its counts. A
// version-1 file gives the seqs with zero counts and CountsPartial set,
// less any entry whose id is empty or over MaxWriterName bytes (counted
// in Skipped; NewServer refuses such ids, which no version-2 table this
// package writes holds).
// A checkpoint without a table file (written before tables existed, or
// by a checkpoint a crash interrupted) gives nil and no error (a restore
// then passes &WriterTable{CountsPartial: true}). Errors: an unreadable
// or malformed file, an unknown version. Cost: O(file size).
func ReadWriterTable(path string) (*WriterTable, error) {
	data, err := os.ReadFile(WriterTableFile(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remote: writer table: %w", err)
	}
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("remote: writer table %s: %w", WriterTableFile(path), err)
	}
	switch v.Version {
	case 1:
		var f writerTableFileV1
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("remote: writer table %s: %w", WriterTableFile(path), err)
		}
		t := &WriterTable{Writers: make(map[string]WriterRecord, len(f.Writers)), CountsPartial: true}
		for name, high := range f.Writers {
			if len(name) == 0 || len(name) > MaxWriterName {
				t.Skipped++ // NewServer would refuse the whole table
				continue
			}
			t.Writers[name] = WriterRecord{High: high}
		}
		return t, nil
	case writerTableVersion:
		var f writerTableFile
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("remote: writer table %s: %w", WriterTableFile(path), err)
		}
		if f.Writers == nil {
			f.Writers = map[string]WriterRecord{}
		}
		return &WriterTable{Writers: f.Writers, Evicted: f.Evicted, CountsPartial: f.CountsPartial, Lineage: f.Lineage}, nil
	default:
		return nil, fmt.Errorf("remote: writer table %s: version %d, this binary reads 1 and %d", WriterTableFile(path), v.Version, writerTableVersion)
	}
}

// writerTable snapshots every writer's record (each one's seq and counts
// together, under its lock) with the table's evicted count and
// partiality. With inflight, a batch going into the buffer now (its
// insert may have ended, its record not yet: beginStore) is counted
// in the record's Items and Batches as if stored: the snapshot taken
// after a checkpoint's copy needs it, since such a batch may be in the
// copy (addCopied then counts it as uncertain). O(writers) under the
// table's lock plus each writer's short one; it waits for no insert.
func (s *Server) writerTable(inflight bool) *WriterTable {
	s.writersMu.Lock()
	defer s.writersMu.Unlock()
	out := &WriterTable{Writers: make(map[string]WriterRecord, len(s.writers)),
		Evicted: s.evictedBefore + s.c.writersEvicted.Load(), CountsPartial: s.countsPartial, Lineage: s.lineage}
	for name, w := range s.writers {
		w.mu.Lock()
		r := WriterRecord{High: w.high.Load(), Items: w.items, Batches: w.batches, UncertainItems: w.uItems, UncertainBatches: w.uBatches}
		if inflight && w.inflight > 0 {
			r.Items += w.inflight
			r.Batches++
		}
		w.mu.Unlock()
		if r != (WriterRecord{}) {
			out.Writers[name] = r
		}
	}
	return out
}

// addCopied counts into before, as uncertain, what after (a snapshot
// taken once the checkpoint's copy ended, in-flight batches included)
// holds beyond it: the batches stored during the copy, and those whose
// buffer insert may have ended before the copy did but were recorded
// only after. O(writers).
func addCopied(before, after *WriterTable) {
	for name, a := range after.Writers {
		b := before.Writers[name]
		if a.Items > b.Items || a.Batches > b.Batches {
			b.UncertainItems += a.Items - min(a.Items, b.Items)
			b.UncertainBatches += a.Batches - min(a.Batches, b.Batches)
			before.Writers[name] = b
		}
	}
}

// MaxInfoWriters is the most writer records one Info reply carries
// (InfoRequest.max_writers): 4096 records of ids up to MaxWriterName
// bytes and four counts take under 700 KiB, within MaxMessageBytes.
const MaxInfoWriters = 4096

// writerPage is the page of the writer table Info carries: the records of
// the ids after after, in byte order, at most limit (0 or above
// MaxInfoWriters: MaxInfoWriters). Each record's seq and counts are read
// together; the page as a whole is not one instant. Cost: O(writers log
// writers) to sort the ids, under the table's lock for O(writers).
func (s *Server) writerPage(after string, limit int) *replayv1.WriterPage {
	if limit <= 0 || limit > MaxInfoWriters {
		limit = MaxInfoWriters
	}
	type entry struct {
		name string
		w    *writerState
	}
	s.writersMu.Lock()
	all := make([]entry, 0, len(s.writers))
	for name, w := range s.writers {
		if name > after {
			all = append(all, entry{name, w})
		}
	}
	p := &replayv1.WriterPage{Known: uint64(len(s.writers)), Evicted: s.evictedBefore + s.c.writersEvicted.Load(),
		CountsPartial: s.countsPartial}
	s.writersMu.Unlock()
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	if len(all) > limit {
		all, p.More = all[:limit], true
	}
	p.Records = make([]*replayv1.WriterRecord, len(all))
	for i, e := range all {
		w := e.w
		w.mu.Lock()
		p.Records[i] = &replayv1.WriterRecord{Id: e.name, High: w.high.Load(), Items: w.items, Batches: w.batches,
			UncertainItems: w.uItems, UncertainBatches: w.uBatches}
		w.mu.Unlock()
	}
	return p
}

// writeWriterTable writes table to WriterTableFile(path) through a
// temporary file renamed over it, synced.
func writeWriterTable(path string, table *WriterTable) error {
	data, err := json.Marshal(writerTableFile{Version: writerTableVersion, Evicted: table.Evicted,
		CountsPartial: table.CountsPartial, Lineage: table.Lineage, Writers: table.Writers})
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
