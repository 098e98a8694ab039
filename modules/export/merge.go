package export

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"

	"github.com/xuri/excelize/v2"
	"gocloud.dev/blob"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelevents"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// TopicCompleted is the completion notice's topic.
const TopicCompleted = "export.completed"

// xlsxSheetRows is how many data rows one worksheet takes (Excel's limit
// is 1,048,576 rows including the header).
const xlsxSheetRows = 1_048_575

type chunkRow struct {
	shard, no   int
	key         string
	first, last int64
	rows, bytes int64
	sha256      string
}

// Verdict is the four-way verification of a finished task.
type Verdict struct {
	TaskRows   int64  `json:"task_rows"`   // the cut's row count fixed at creation
	ShardRows  int64  `json:"shard_rows"`  // the shards' committed rows
	ObjectRows int64  `json:"object_rows"` // the object's metadata
	FileRows   int64  `json:"file_rows"`   // counted by reading the file back
	ObjectSize int64  `json:"object_size"`
	SHA256     string `json:"sha256"`
	ReadSHA256 string `json:"read_sha256"`
	OK         bool   `json:"ok"`
}

// workMerge is the merger of one (task, merge generation): it checks the
// shards, writes the final object under the generation's stable key,
// verifies it and publishes it with a conditional update naming its digest.
func (m *Module[TTx]) workMerge(ctx context.Context, job *keel.Job[MergeArgs]) error {
	c, err := m.Client()
	if err != nil {
		return err
	}
	t, err := m.Task(ctx, job.Args.TaskID)
	if err != nil {
		return err
	}
	if t.State != StateMerging || t.MergeGen != job.Args.Gen {
		return nil // published, cancelled, or a newer generation's
	}
	shards, err := m.Shards(ctx, t.ID)
	if err != nil {
		return err
	}
	chunks, err := m.chunksOf(ctx, t.ID)
	if err != nil {
		return err
	}
	shardRows, err := checkShards(t, shards, chunks)
	if err != nil {
		return m.fail(ctx, t, err.Error(), Verdict{TaskRows: t.EstimatedRows, ShardRows: shardRows})
	}
	key := finalKey(t.ID, t.MergeGen, t.Format, t.Gzip)
	attrs, err := lookup(ctx, m.bucket, key)
	if err != nil {
		return err
	}
	var sum string
	var size int64
	if attrs == nil {
		sum, size, err = m.writeFinal(ctx, t, key, shards, chunks, shardRows)
		if err != nil {
			return err
		}
		if m.hooks.AfterFinalUpload != nil {
			if err := m.hooks.AfterFinalUpload(t.ID, t.MergeGen); err != nil {
				return err
			}
		}
	} else {
		// An earlier attempt wrote this generation and lost its publish,
		// or did not learn its outcome: the object is checked against the
		// file the parts make; matching, it is published as is (commit
		// only).
		if attrs.Metadata["rows"] != strconv.FormatInt(shardRows, 10) {
			return m.quarantineFinal(ctx, c, t, key, "the object at the stable key names other rows")
		}
		if sum, size, err = m.expectedFinal(ctx, t, shards, chunks); err != nil {
			return err
		}
	}
	v, err := m.verify(ctx, t, key, shardRows, sum, size)
	if err != nil {
		return err
	}
	if !v.OK {
		if attrs != nil {
			return m.quarantineFinal(ctx, c, t, key, "the object at the stable key fails verification")
		}
		return m.fail(ctx, t, "the written file does not verify", v)
	}
	if attrs != nil {
		m.count("final_match")
	}
	detail, _ := json.Marshal(v)
	return m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		n, err := tx.Exec(ctx, m.q.Get("TaskPublish"), t.ID, t.MergeGen, key, v.SHA256, v.ObjectSize, v.FileRows, "ok", string(detail), m.Now())
		if err != nil {
			return err
		}
		if n == 1 && m.events != nil {
			payload, _ := json.Marshal(map[string]any{"task": t.ID, "tenant": t.Tenant, "user": t.User, "rows": v.FileRows, "sha256": v.SHA256})
			if err := m.events.EmitTx(ctx, tx, keelevents.Event{Topic: TopicCompleted, ID: fmt.Sprintf("export-%d:completed", t.ID),
				Key: fmt.Sprintf("export-%d", t.ID), Payload: payload}); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, m.q.Get("TaskNotice"), t.ID, "pending"); err != nil {
				return err
			}
		}
		err = c.CompleteTx(ctx, tx.Native(), job, map[string]any{"key": key, "sha256": v.SHA256})
		if errors.Is(err, keeltype.ErrStaleFence) {
			m.count("stale_refused")
		}
		return err
	})
}

// checkShards: every shard done, ranges contiguous from the task's lo to
// its hi without overlap, each shard's chunks contiguous and summing to its
// counts. It returns the rows of the shards.
func checkShards(t *Task, shards []Shard, chunks []chunkRow) (int64, error) {
	var rows int64
	at := t.RangeLo
	byShard := map[int][]chunkRow{}
	for _, c := range chunks {
		byShard[c.shard] = append(byShard[c.shard], c)
	}
	for i, s := range shards {
		if s.No != i || s.State != "done" {
			return rows, fmt.Errorf("shard %d is %s, not done", s.No, s.State)
		}
		if s.Lo != at {
			return rows, fmt.Errorf("shard %d starts at %d, the previous ended at %d", s.No, s.Lo, at)
		}
		var r, b int64
		cur := s.Lo
		for j, c := range byShard[s.No] {
			if c.no != j || c.first <= cur && c.rows > 0 {
				return rows, fmt.Errorf("shard %d chunk %d overlaps or is missing", s.No, c.no)
			}
			cur = c.last
			r += c.rows
			b += c.bytes
		}
		if cur != s.Hi || r != s.Rows || b != s.Bytes || len(byShard[s.No]) != s.Chunks {
			return rows, fmt.Errorf("shard %d: chunks cover up to %d with %d rows, the shard says %d with %d", s.No, cur, r, s.Hi, s.Rows)
		}
		rows += s.Rows
		at = s.Hi
	}
	if at != t.RangeHi {
		return rows, fmt.Errorf("the shards end at %d, the cut at %d", at, t.RangeHi)
	}
	if rows != t.EstimatedRows {
		return rows, fmt.Errorf("the shards hold %d rows, the cut %d", rows, t.EstimatedRows)
	}
	return rows, nil
}

func (m *Module[TTx]) chunksOf(ctx context.Context, task int64) ([]chunkRow, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("ChunksOf"), task)
	return keelsql.CollectRows(rows, err, func(r keelsql.Rows) (chunkRow, error) {
		var c chunkRow
		err := r.Scan(&c.shard, &c.no, &c.key, &c.first, &c.last, &c.rows, &c.bytes, &c.sha256)
		return c, err
	})
}

type hashCounter struct {
	h hash.Hash
	n int64
}

func (h *hashCounter) Write(p []byte) (int, error) {
	h.h.Write(p)
	h.n += int64(len(p))
	return len(p), nil
}

// writeFinal streams the parts, checking each chunk's and shard's digest
// as it reads them, straight into the final object, hashing and counting
// the bytes on the way: the digest is known when the upload closes, and
// recorded by the publish (the database is the authority); the object's
// metadata names the rows. Large files go up in multipart uploads on S3
// (5 MiB parts, one at a time, so the buffer stays bounded).
func (m *Module[TTx]) writeFinal(ctx context.Context, t *Task, key string, shards []Shard, chunks []chunkRow, rows int64) (string, int64, error) {
	ct := "text/csv; charset=utf-8"
	switch {
	case t.Gzip:
		ct = "application/gzip"
	case t.Format == "xlsx":
		ct = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := m.bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: ct, BufferSize: 5 << 20, MaxConcurrency: 1,
		Metadata: map[string]string{"task": strconv.FormatInt(t.ID, 10), "gen": strconv.Itoa(t.MergeGen),
			"rows": strconv.FormatInt(rows, 10), "data-version": strconv.FormatInt(t.DataVersion, 10)}})
	if err != nil {
		return "", 0, err
	}
	hc := &hashCounter{h: sha256.New()}
	bw := bufio.NewWriterSize(io.MultiWriter(w, hc), 256<<10)
	err = m.render(ctx, t, bw, shards, chunks)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		cancel()
		_ = w.Close()
		return "", 0, fmt.Errorf("export: writing %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		// Outcome unknown: the next attempt finds the key and checks it.
		return "", 0, fmt.Errorf("export: uploading %s: %w", key, err)
	}
	return hex.EncodeToString(hc.h.Sum(nil)), hc.n, nil
}

// expectedFinal is the digest and size the final object of this
// generation must have: the file rendered again from the parts, hashed
// only (an earlier attempt wrote it and did not publish).
func (m *Module[TTx]) expectedFinal(ctx context.Context, t *Task, shards []Shard, chunks []chunkRow) (string, int64, error) {
	hc := &hashCounter{h: sha256.New()}
	bw := bufio.NewWriterSize(hc, 256<<10)
	if err := m.render(ctx, t, bw, shards, chunks); err != nil {
		return "", 0, err
	}
	if err := bw.Flush(); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(hc.h.Sum(nil)), hc.n, nil
}

// render writes the file's bytes: CSV ([BOM] header, the parts' records,
// optionally gzip) or XLSX through excelize's StreamWriter.
func (m *Module[TTx]) render(ctx context.Context, t *Task, out io.Writer, shards []Shard, chunks []chunkRow) error {
	var gz *gzip.Writer
	if t.Gzip {
		gz, _ = gzip.NewWriterLevel(out, gzip.BestSpeed)
		out = gz
	}
	var err error
	if t.Format == "xlsx" {
		err = m.renderXLSX(ctx, t, out, shards, chunks)
	} else {
		err = m.renderCSV(ctx, t, out, shards, chunks)
	}
	if err != nil {
		return err
	}
	if gz != nil {
		return gz.Close()
	}
	return nil
}

func (m *Module[TTx]) renderCSV(ctx context.Context, t *Task, out io.Writer, shards []Shard, chunks []chunkRow) error {
	if t.BOM {
		if _, err := out.Write([]byte{0xEF, 0xBB, 0xBF}); err != nil {
			return err
		}
	}
	hw := csv.NewWriter(out)
	if err := hw.Write(t.Params.Columns); err != nil {
		return err
	}
	hw.Flush()
	return m.eachPart(ctx, shards, chunks, func(r io.Reader) error {
		_, err := io.Copy(out, r)
		return err
	})
}

func (m *Module[TTx]) renderXLSX(ctx context.Context, t *Task, out io.Writer, shards []Shard, chunks []chunkRow) error {
	f := excelize.NewFile()
	defer f.Close()
	sheet := "Sheet1"
	sheetNo := 1
	sw, err := f.NewStreamWriter(sheet)
	if err != nil {
		return err
	}
	header := func(sw *excelize.StreamWriter) error {
		row := make([]any, len(t.Params.Columns))
		for i, c := range t.Params.Columns {
			row[i] = c
		}
		return sw.SetRow("A1", row)
	}
	if err := header(sw); err != nil {
		return err
	}
	line := 1
	row := make([]any, len(t.Params.Columns))
	err = m.eachPart(ctx, shards, chunks, func(r io.Reader) error {
		cr := csv.NewReader(r)
		cr.ReuseRecord = true
		cr.FieldsPerRecord = len(t.Params.Columns)
		for {
			rec, err := cr.Read()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if line > xlsxSheetRows {
				if err := sw.Flush(); err != nil {
					return err
				}
				sheetNo++
				sheet = fmt.Sprintf("Sheet%d", sheetNo)
				if _, err := f.NewSheet(sheet); err != nil {
					return err
				}
				if sw, err = f.NewStreamWriter(sheet); err != nil {
					return err
				}
				if err := header(sw); err != nil {
					return err
				}
				line = 1
			}
			for i, c := range t.Params.Columns {
				switch c {
				case "id", "amount_minor":
					n, _ := strconv.ParseInt(rec[i], 10, 64)
					row[i] = n
				default:
					row[i] = rec[i]
				}
			}
			line++
			cell, _ := excelize.CoordinatesToCellName(1, line)
			if err := sw.SetRow(cell, row); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return err
	}
	if err := sw.Flush(); err != nil {
		return err
	}
	_, err = f.WriteTo(out)
	return err
}

// eachPart hands each chunk's bytes to f in order, checking each chunk's
// digest as it streams and each shard's digest over its chunks' digests.
func (m *Module[TTx]) eachPart(ctx context.Context, shards []Shard, chunks []chunkRow, f func(io.Reader) error) error {
	i := 0
	ch := sha256.New()
	for _, s := range shards {
		var sums []string
		for ; i < len(chunks) && chunks[i].shard == s.No; i++ {
			c := chunks[i]
			rd, err := m.bucket.NewReader(ctx, c.key, nil)
			if err != nil {
				return fmt.Errorf("export: reading part %s: %w", c.key, err)
			}
			ch.Reset()
			err = f(io.TeeReader(rd, ch))
			rd.Close()
			if err != nil {
				return fmt.Errorf("export: merging part %s: %w", c.key, err)
			}
			got := hex.EncodeToString(ch.Sum(nil))
			if got != c.sha256 {
				return keel.JobPermanent(fmt.Errorf("export: part %s has digest %s, committed %s", c.key, got, c.sha256))
			}
			sums = append(sums, got)
		}
		if got := digestOfDigests(sums); got != s.SHA256 {
			return keel.JobPermanent(fmt.Errorf("export: shard %d has digest %s, committed %s", s.No, got, s.SHA256))
		}
	}
	return nil
}

// verify is the four-way check: the task's row count, the shards', the
// object's metadata and the file's own, read back from the store.
func (m *Module[TTx]) verify(ctx context.Context, t *Task, key string, shardRows int64, sum string, size int64) (Verdict, error) {
	v := Verdict{TaskRows: t.EstimatedRows, ShardRows: shardRows, SHA256: sum}
	attrs, err := lookup(ctx, m.bucket, key)
	if err != nil {
		return v, err
	}
	if attrs == nil {
		return v, fmt.Errorf("export: %s vanished before verification", key)
	}
	v.ObjectSize = attrs.Size
	v.ObjectRows, _ = strconv.ParseInt(attrs.Metadata["rows"], 10, 64)
	rows, read, err := m.countFile(ctx, t, key)
	if err != nil {
		return v, err
	}
	v.FileRows, v.ReadSHA256 = rows, read
	v.OK = v.TaskRows == v.ShardRows && v.ShardRows == v.ObjectRows && v.ObjectRows == v.FileRows &&
		v.ReadSHA256 == sum && attrs.Size == size
	return v, nil
}

// countFile reads the object back: its SHA-256 and its data rows.
func (m *Module[TTx]) countFile(ctx context.Context, t *Task, key string) (int64, string, error) {
	rd, err := m.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return 0, "", err
	}
	defer rd.Close()
	h := sha256.New()
	var src io.Reader = io.TeeReader(rd, h)
	finish := func(n int64, err error) (int64, string, error) {
		if err != nil {
			return 0, "", err
		}
		// Drain what the parser did not need so the digest is the object's.
		if _, err := io.Copy(io.Discard, src); err != nil {
			return 0, "", err
		}
		return n, hex.EncodeToString(h.Sum(nil)), nil
	}
	if t.Gzip {
		zr, err := gzip.NewReader(src)
		if err != nil {
			return 0, "", err
		}
		defer zr.Close()
		if t.Format == "xlsx" {
			return finish(countXLSX(zr))
		}
		n, err := countCSV(zr)
		if err == nil {
			_, err = io.Copy(io.Discard, zr)
		}
		return finish(n, err)
	}
	if t.Format == "xlsx" {
		return finish(countXLSX(src))
	}
	return finish(countCSV(src))
}

// countCSV counts the data rows of a CSV export (BOM and header skipped):
// records end at a line feed outside quotes, the rule encoding/csv reads
// by, counted without splitting fields (the read-back is a full pass over
// the file, so it must not cost more than writing it did).
func countCSV(r io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	quoted, pending, start := false, false, true
	for {
		k, err := r.Read(buf)
		p := buf[:k]
		if start && len(p) > 0 {
			p = bytes.TrimPrefix(p, []byte{0xEF, 0xBB, 0xBF})
			start = false
		}
		for len(p) > 0 {
			pending = true
			var i int
			if quoted {
				i = bytes.IndexByte(p, '"')
			} else {
				i = bytes.IndexAny(p, "\"\n")
			}
			if i < 0 {
				break
			}
			switch p[i] {
			case '"':
				// A doubled quote inside a quoted field toggles twice.
				quoted = !quoted
			case '\n':
				n++
				pending = false
			}
			p = p[i+1:]
		}
		if err == io.EOF {
			if quoted {
				return 0, errors.New("export: reading the file back: a quoted field is not closed")
			}
			if pending {
				n++ // the last record has no line feed
			}
			return max(0, n-1), nil
		}
		if err != nil {
			return 0, fmt.Errorf("export: reading the file back: %w", err)
		}
	}
}

// countXLSX counts the data rows of every worksheet: the zip is spooled to
// a temporary file (zip needs random access) and each sheet's XML is
// streamed, so memory stays bounded whatever the size.
func countXLSX(r io.Reader) (int64, error) {
	tmp, err := os.CreateTemp("", "keel-export-verify-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	size, err := io.Copy(tmp, r)
	if err != nil {
		return 0, err
	}
	zr, err := zip.NewReader(tmp, size)
	if err != nil {
		return 0, fmt.Errorf("export: the xlsx file is not a zip: %w", err)
	}
	var n int64
	for _, f := range zr.File {
		if len(f.Name) < 14 || f.Name[:14] != "xl/worksheets/" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return 0, err
		}
		d := xml.NewDecoder(rc)
		rows := int64(0)
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				return 0, err
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "row" {
				rows++
			}
		}
		rc.Close()
		n += max(0, rows-1)
	}
	return n, nil
}

// quarantineFinal keeps a mismatching final object where it is and moves
// the merge to the next generation (a new stable key): never overwritten.
func (m *Module[TTx]) quarantineFinal(ctx context.Context, c *keel.Client[TTx], t *Task, key, reason string) error {
	m.count("final_mismatch")
	return m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := tx.Exec(ctx, m.q.Get("QuarantineInsert"), key, t.ID, reason, m.Now()); err != nil {
			return err
		}
		var gen int
		err := tx.QueryRow(ctx, m.q.Get("TaskMergeBump"), t.ID, t.MergeGen, m.Now()).Scan(&gen)
		if errors.Is(err, keelsql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = c.InsertTx(ctx, tx.Native(), MergeArgs{TaskID: t.ID, Gen: gen}, &keel.InsertOpts{
			Queue: QueueMerge, MaxAttempts: 10, IdempotencyKey: fmt.Sprintf("export-merge:%d:%d", t.ID, gen)})
		return err
	})
}

// fail ends a task whose file cannot be produced correctly, with the
// verdict that says why.
func (m *Module[TTx]) fail(ctx context.Context, t *Task, reason string, v Verdict) error {
	detail, _ := json.Marshal(v)
	err := m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		_, err := tx.Exec(ctx, m.q.Get("TaskFail"), t.ID, reason, "mismatch", string(detail), m.Now())
		return err
	})
	if err != nil {
		return err
	}
	m.Log.Error("export failed verification", "task", t.ID, "reason", reason)
	return keel.JobPermanent(errors.New(reason))
}
