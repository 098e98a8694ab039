package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"gocloud.dev/blob"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
)

// errStale: this executor's fence is no longer the shard's; it stops, and
// nothing it did after losing the shard is kept.
var errStale = errors.New("export: shard taken over by a newer fence")

// shardRun is one attempt's view of its shard.
type shardRun struct {
	task        *Task
	no          int
	fence       int64
	lo, hi      int64
	cursor      int64
	rows, bytes int64
	chunks      int
	resumed     bool // an earlier attempt ran: its last upload's outcome is unknown
}

// workShard runs one shard: it adopts the engine's fence, then streams the
// shard's range chunk by chunk from the last committed cursor. Each chunk
// is one part object under a stable key and one commit of cursor, counts
// and the running SHA-256 state, with the fence in the condition.
func (m *Module[TTx]) workShard(ctx context.Context, job *keel.Job[ShardArgs]) error {
	c, err := m.Client()
	if err != nil {
		return err
	}
	t, err := m.Task(ctx, job.Args.TaskID)
	if err != nil {
		return err
	}
	if t.State != StateRunning {
		return nil // cancelled, failed or past this shard: nothing to do
	}
	r := &shardRun{task: t, no: job.Args.Shard, fence: job.Fence, resumed: job.Attempt > 1}
	var state []byte
	err = m.DB.QueryRow(ctx, m.q.Get("ShardAdopt"), t.ID, r.no, job.Fence, m.owner, m.Now()).
		Scan(&r.lo, &r.hi, &r.cursor, &r.rows, &r.bytes, &r.chunks, &state)
	if errors.Is(err, keelsql.ErrNoRows) {
		return nil // done already, or a newer fence holds it
	}
	if err != nil {
		return fmt.Errorf("export: adopting shard %d/%d: %w", t.ID, r.no, err)
	}
	m.noteStart(ctx, t)
	_ = state // digest state of an earlier layout; a shard's digest is now its chunks'
	for r.cursor < r.hi {
		if m.hooks.BeforeChunk != nil {
			m.hooks.BeforeChunk(ctx, t.ID, r.no, r.chunks)
		}
		if cur, err := m.Task(ctx, t.ID); err == nil && cur.State != StateRunning {
			return nil // cancelled while running
		}
		if err := m.chunk(ctx, r); err != nil {
			if errors.Is(err, errQuarantine) {
				return nil
			}
			return err
		}
	}
	digest, err := m.shardDigest(ctx, t.ID, r.no)
	if err != nil {
		return err
	}
	// The commit decides, not this attempt's context: a stopping worker's
	// last commit either lands under its fence or is refused by it.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = m.DB.InTx(cctx, func(tx keelsql.Tx[TTx]) error {
		n, err := tx.Exec(cctx, m.q.Get("ShardFinish"), t.ID, r.no, r.fence, digest, m.Now())
		if err != nil {
			return err
		}
		if n == 0 {
			return errStale
		}
		var done, total, gen int
		err = tx.QueryRow(cctx, m.q.Get("TaskShardDone"), t.ID, m.Now()).Scan(&done, &total, &gen)
		if err != nil && !errors.Is(err, keelsql.ErrNoRows) {
			return err
		}
		if err == nil && done == total {
			if _, err := c.InsertTx(cctx, tx.Native(), MergeArgs{TaskID: t.ID, Gen: gen}, &keel.InsertOpts{
				Queue: QueueMerge, MaxAttempts: 10, IdempotencyKey: fmt.Sprintf("export-merge:%d:%d", t.ID, gen)}); err != nil {
				return err
			}
		}
		if err := c.CompleteTx(cctx, tx.Native(), job, map[string]any{"rows": r.rows, "sha256": digest}); err != nil {
			if errors.Is(err, keeltype.ErrStaleFence) {
				return errStale
			}
			return err
		}
		return nil
	})
	if errors.Is(err, errStale) {
		// Recorded outside the refused transaction (on SQLite it holds the
		// one writer connection).
		return m.stale(cctx, r)
	}
	return err
}

// stale records a refused commit and ends the attempt.
func (m *Module[TTx]) stale(ctx context.Context, r *shardRun) error {
	if _, err := m.DB.Exec(ctx, m.q.Get("ShardStale"), r.task.ID, r.no); err != nil {
		m.Log.Warn("recording a stale commit", "error", err)
	}
	m.count("stale_refused")
	return errStale
}

// chunk writes and commits the next chunk of r. Before writing, the stable
// key is looked up: a previous attempt may have uploaded it and lost its
// commit, or timed out not knowing. Absent → upload. Present → the chunk is
// recomputed from the cut (hash only) and compared: the same bytes → commit
// only; different → the object is quarantined, never overwritten.
func (m *Module[TTx]) chunk(ctx context.Context, r *shardRun) error {
	t := r.task
	key := partKey(t.ID, t.DataVersion, r.no, r.chunks)
	attrs, err := lookup(ctx, m.bucket, key)
	if err != nil {
		return err
	}
	ch := sha256.New()
	var w *blob.Writer
	var sink io.Writer = ch
	// gocloud aborts a write whose context ends before Close: cancelling
	// wctx is how an upload that must not land is abandoned.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if attrs == nil {
		w, err = m.bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "text/csv; charset=utf-8",
			BufferSize: 1 << 20, MaxConcurrency: 1,
			Metadata: map[string]string{"task": strconv.FormatInt(t.ID, 10), "shard": strconv.Itoa(r.no),
				"chunk": strconv.Itoa(r.chunks), "data-version": strconv.FormatInt(t.DataVersion, 10)}})
		if err != nil {
			return fmt.Errorf("export: opening %s: %w", key, err)
		}
		sink = io.MultiWriter(w, ch)
	}
	first, last, rows, n, err := m.streamRows(ctx, t, r.cursor, r.hi, m.set.chunkRows, sink)
	if err == nil && w != nil && m.hooks.FailUpload != nil {
		err = m.hooks.FailUpload(t.ID, r.no, r.chunks)
	}
	if err != nil {
		if w != nil {
			cancel()
			_ = w.Close()
		}
		return err
	}
	sum := hex.EncodeToString(ch.Sum(nil))
	settled := ""
	if w != nil {
		if err := w.Close(); err != nil {
			// Outcome unknown: the next attempt looks the key up first.
			return fmt.Errorf("export: uploading %s: %w", key, err)
		}
		if r.resumed {
			settled = fmt.Sprintf("chunk %d: absent after an unfinished attempt, uploaded again", r.chunks)
			m.count("settle_absent")
		}
		if m.hooks.AfterChunkUpload != nil {
			if err := m.hooks.AfterChunkUpload(t.ID, r.no, r.chunks); err != nil {
				return err
			}
		}
	} else {
		same, err := m.sameObject(ctx, key, attrs, sum, n)
		if err != nil {
			return err
		}
		if !same {
			m.count("settle_mismatch")
			return m.quarantineShard(ctx, r, key)
		}
		m.count("settle_match")
		settled = fmt.Sprintf("chunk %d: found uploaded with the same digest, committed only", r.chunks)
	}
	r.resumed = false
	cursor := r.hi
	if rows == m.set.chunkRows {
		cursor = last // more may follow in the range
	}
	if rows == 0 {
		first, last = r.cursor, r.hi
	}
	if m.hooks.BeforeCommit != nil {
		m.hooks.BeforeCommit(t.ID, r.no, r.chunks)
	}
	// The commit decides, not this attempt's context: a stopping worker's
	// last commit either lands under its fence or is refused by it.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer ccancel()
	err = m.DB.InTx(cctx, func(tx keelsql.Tx[TTx]) error {
		k, err := tx.Exec(cctx, m.q.Get("ChunkCommit"), t.ID, r.no, r.fence, cursor, r.rows+int64(rows), r.bytes+n,
			r.chunks, []byte(nil), m.Now())
		if err != nil {
			return err
		}
		if k == 0 {
			return errStale
		}
		if _, err := tx.Exec(cctx, m.q.Get("ChunkInsert"), t.ID, r.no, r.chunks, key, first, last, int64(rows), n, sum); err != nil {
			return err
		}
		if settled != "" {
			if _, err := tx.Exec(cctx, m.q.Get("ShardSettled"), t.ID, r.no, settled, r.fence); err != nil {
				return err
			}
		}
		_, err = tx.Exec(cctx, m.q.Get("TaskRowsAdd"), t.ID, int64(rows), m.Now())
		return err
	})
	if errors.Is(err, errStale) {
		return m.stale(cctx, r)
	}
	if err != nil {
		return fmt.Errorf("export: committing chunk %s: %w", key, err)
	}
	r.cursor, r.rows, r.bytes = cursor, r.rows+int64(rows), r.bytes+n
	r.chunks++
	return nil
}

// shardDigest is a shard's digest: SHA-256 over its committed chunks'
// digests in order (each hex, LF-terminated). Every byte is hashed once,
// by its chunk; the merge checks each chunk's bytes and then this list.
func (m *Module[TTx]) shardDigest(ctx context.Context, task int64, shard int) (string, error) {
	rows, err := m.DB.Query(ctx, m.q.Get("ChunkSums"), task, shard)
	sums, err := keelsql.CollectRows(rows, err, func(r keelsql.Rows) (string, error) {
		var s string
		return s, r.Scan(&s)
	})
	if err != nil {
		return "", fmt.Errorf("export: reading the chunk digests of shard %d/%d: %w", task, shard, err)
	}
	return digestOfDigests(sums), nil
}

func digestOfDigests(sums []string) string {
	h := sha256.New()
	for _, s := range sums {
		h.Write([]byte(s))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sameObject compares the object at key with the chunk this attempt would
// write (its digest and length): it is read back and hashed, since an
// object's own metadata cannot carry a digest known only after writing.
func (m *Module[TTx]) sameObject(ctx context.Context, key string, attrs *blob.Attributes, sum string, n int64) (bool, error) {
	if attrs.Size != n {
		return false, nil
	}
	rd, err := m.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return false, fmt.Errorf("export: reading %s back: %w", key, err)
	}
	defer rd.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rd); err != nil {
		return false, fmt.Errorf("export: reading %s back: %w", key, err)
	}
	return hex.EncodeToString(h.Sum(nil)) == sum, nil
}

// quarantineShard records the mismatching object and stops the shard and
// its task: the object stays where it is, untouched, for an operator.
func (m *Module[TTx]) quarantineShard(ctx context.Context, r *shardRun, key string) error {
	reason := fmt.Sprintf("shard %d chunk %d: an object at the stable key differs from the cut", r.no, r.chunks)
	err := m.DB.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		if _, err := tx.Exec(ctx, m.q.Get("QuarantineInsert"), key, r.task.ID, reason, m.Now()); err != nil {
			return err
		}
		n, err := tx.Exec(ctx, m.q.Get("ShardQuarantine"), r.task.ID, r.no, r.fence, reason, m.Now())
		if err != nil {
			return err
		}
		if n == 0 {
			return errStale
		}
		_, err = tx.Exec(ctx, m.q.Get("TaskQuarantine"), r.task.ID, reason, m.Now())
		return err
	})
	if errors.Is(err, errStale) {
		return m.stale(ctx, r)
	}
	if err != nil {
		return err
	}
	m.Log.Warn("export object quarantined", "task", r.task.ID, "key", key)
	return errQuarantine
}

// streamRows writes the cut's rows of (after, hi] as CSV records to w, at
// most limit rows, in keyset batches of at most batch_rows rows over id
// windows of batch_rows ids: each statement's work is bounded whatever
// plan the database picks (a plan without statistics may otherwise read
// the whole rest of the range for every batch). One batch is the most
// ever held, as encoded bytes. It returns the first and last id written,
// the rows and bytes.
func (m *Module[TTx]) streamRows(ctx context.Context, t *Task, after, hi int64, limit int, w io.Writer) (first, last int64, rows int, n int64, err error) {
	cols := colsOf(t.Params.Columns)
	buf := make([]byte, 0, flushBytes+4096)
	flush := func() error {
		k, err := w.Write(buf)
		n += int64(k)
		buf = buf[:0]
		return err
	}
	dialect := m.DB.Dialect()
	span := int64(m.set.batchRows)
	last = after
	pos := after // every id of (after, pos] has been read
	var o rawOrder
	for rows < limit && pos < hi {
		want := min(m.set.batchRows, limit-rows)
		top := hi
		if hi-pos > span {
			top = pos + span
		}
		rs, err := m.DB.Query(ctx, m.q.Get("SourceBatch"), t.Tenant, t.DataVersion, t.Params.Status, t.Params.From, t.Params.To, pos, top, want)
		if err != nil {
			return 0, 0, 0, 0, fmt.Errorf("export: reading orders after %d: %w", pos, err)
		}
		src := newRawSource(rs, dialect)
		got := 0
		for rs.Next() {
			if err := src.next(&o); err != nil {
				rs.Close()
				return 0, 0, 0, 0, fmt.Errorf("export: reading orders: %w", err)
			}
			buf = appendRecord(buf, cols, &o)
			if first == 0 {
				first = o.id
			}
			last = o.id
			got++
			if len(buf) >= flushBytes {
				if err := flush(); err != nil {
					rs.Close()
					return 0, 0, 0, 0, err
				}
			}
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return 0, 0, 0, 0, fmt.Errorf("export: reading orders: %w", err)
		}
		rows += got
		if got == want {
			pos = last // the window may hold more
		} else {
			pos = top
		}
	}
	if err := flush(); err != nil {
		return 0, 0, 0, 0, err
	}
	return first, last, rows, n, nil
}

// flushBytes is how much encoded CSV is written to the part at once.
const flushBytes = 256 << 10

type orderRow struct {
	id        int64
	orderNo   string
	customer  string
	amount    int64
	currency  string
	status    string
	createdAt time.Time
}

func (o *orderRow) record(cols []string, rec []string) {
	for i, c := range cols {
		switch c {
		case "id":
			rec[i] = strconv.FormatInt(o.id, 10)
		case "order_no":
			rec[i] = o.orderNo
		case "customer":
			rec[i] = o.customer
		case "amount_minor":
			rec[i] = strconv.FormatInt(o.amount, 10)
		case "currency":
			rec[i] = o.currency
		case "status":
			rec[i] = o.status
		case "created_at":
			rec[i] = o.createdAt.UTC().Format(time.RFC3339)
		}
	}
}
