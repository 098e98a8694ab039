package keel

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// Bulk tasks ("batches"). A module describes a population of subjects with a
// filter type F and implements BatchSource[F]; an operator previews the
// filter (counts plus a signed token) and creates the batch from the token.
// The server re-materializes the items from the token's filter and snapshot
// time, never from a client's id list. Items are jobs (batch_id, subject)
// run by the ordinary engine; see docs/batches.md.

// Defaults of BatchOpts.
const (
	// DefaultBatchRate is the claims per second of each flow key of a batch.
	DefaultBatchRate = 10
	// DefaultBatchAutoPause is the consecutive real failures that pause one
	// flow key of a batch.
	DefaultBatchAutoPause = 10
	// DefaultBatchChunk is how many items one materialization transaction
	// inserts.
	DefaultBatchChunk = 5000
	// MinBatchReasonRunes is the shortest accepted batch reason.
	MinBatchReasonRunes = 5
)

// Wait reasons with their own outcome bucket (pass them to JobWait).
const (
	// WaitConnection: the counterpart is offline; nothing was sent.
	WaitConnection = "connection"
	// WaitExternalACK: another channel sent it; waiting for that ACK.
	WaitExternalACK = "external_ack"
	// WaitACK: this item was sent; waiting for the counterpart's ACK.
	WaitACK = "ack"
)

// BatchPreview is what an operator sees before creating a batch. The source
// fills the counts; the engine fills the rest and signs Token.
type BatchPreview struct {
	// Hits: records matching the filter at the snapshot time.
	Hits int64 `json:"hits"`
	// Eligible: hits that will become items.
	Eligible int64 `json:"eligible"`
	// RuleSkipped: hits excluded by the source's rules (Hits - Eligible
	// unless the source says otherwise).
	RuleSkipped int64 `json:"rule_skipped"`
	// ByState: hits per the subject's own state.
	ByState map[string]int64 `json:"by_state"`
	// DistinctKeys: flow keys (e.g. applications) among eligible subjects.
	DistinctKeys int64 `json:"distinct_keys"`
	// Earliest: creation time of the oldest hit.
	Earliest *time.Time `json:"earliest,omitempty"`

	Kind       string          `json:"kind"`
	Filter     json.RawMessage `json:"filter"`
	SnapshotAt time.Time       `json:"snapshot_at"`
	Operator   string          `json:"operator"`
	ExpiresAt  time.Time       `json:"expires_at"`
	Token      string          `json:"token"`
}

// BatchSource is a module's population of subjects under a filter F. Both
// functions must honour snapshot: a record created after it is neither
// counted nor emitted, so creation reproduces what the preview counted.
type BatchSource[F any] interface {
	// Kind names the batch kind ("downstream.requeue").
	Kind() string
	// Preview counts the filter at snapshot (Hits, Eligible, RuleSkipped,
	// ByState, DistinctKeys, Earliest); other fields are the engine's.
	Preview(ctx context.Context, filter F, snapshot time.Time) (*BatchPreview, error)
	// Subjects emits each eligible subject once: its id (unique within the
	// batch), its flow key (e.g. "app:42"; rate limits and auto-pause apply
	// per key within the batch) and the item's job args. Stream from the
	// source; emit inserts in chunks, each its own transaction. On SQLite,
	// read through a connection other than the driver's writer.
	Subjects(ctx context.Context, filter F, snapshot time.Time, emit func(subject, flowKey string, args JobArgs) error) error
}

// BatchOpts are the operator's choices at creation.
type BatchOpts struct {
	Name string
	// Reason is required: at least MinBatchReasonRunes characters (an
	// incident, a ticket, an explanation).
	Reason string
	// Queue of the items; default DefaultQueue.
	Queue string
	// Rate is the claims per second of each flow key of the batch (default
	// DefaultBatchRate; negative = unlimited).
	Rate float64
	// AutoPauseFailures pauses one flow key of the batch after that many
	// consecutive real failures (default DefaultBatchAutoPause; negative =
	// never).
	AutoPauseFailures int
	// PauseOnKeyPause pauses the whole batch when any of its keys
	// auto-pauses (default: only that key stops).
	PauseOnKeyPause bool
	// ChunkSize of materialization (default DefaultBatchChunk).
	ChunkSize int
}

// BatchKeyPrefix is the prefix of every flow key of batch id: items carry
// "batch:<id>:<key>", so rate limits, breakers and auto-pause are scoped to
// the batch and one key's pause leaves the batch's other keys running.
func BatchKeyPrefix(id int64) string { return "batch:" + strconv.FormatInt(id, 10) + ":" }

// batchOfKey returns the batch id of a batch flow key.
func batchOfKey(key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, "batch:")
	if !ok {
		return 0, false
	}
	idText, _, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(idText, 10, 64)
	return id, err == nil && id > 0
}

// tokenPayload is what a preview token signs.
type tokenPayload struct {
	V        int             `json:"v"`
	Kind     string          `json:"k"`
	Filter   json.RawMessage `json:"f"`
	Hash     string          `json:"h"`
	Snapshot time.Time       `json:"s"`
	Operator string          `json:"o"`
	Expires  int64           `json:"e"` // unix microseconds
	Preview  json.RawMessage `json:"p"`
}

// canonicalJSON encodes v with object keys sorted and no insignificant
// space, so equal filters hash equally whatever their field order.
func canonicalJSON(v any) (json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

func filterHash(canon []byte) string {
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

func (c *Client[TTx]) signToken(p *tokenPayload) (string, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, c.config.BatchSigningKey)
	mac.Write(raw)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(raw) + "." + enc.EncodeToString(mac.Sum(nil)), nil
}

// verifyToken checks signature, expiry, operator and kind, in that order.
func (c *Client[TTx]) verifyToken(ctx context.Context, token, kind string) (*tokenPayload, error) {
	if len(c.config.BatchSigningKey) == 0 {
		return nil, fmt.Errorf("%w: Config.BatchSigningKey is not set", keeltype.ErrInvalidArgument)
	}
	body, sig, ok := strings.Cut(token, ".")
	enc := base64.RawURLEncoding
	raw, err1 := enc.DecodeString(body)
	got, err2 := enc.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: malformed", keeltype.ErrBatchToken)
	}
	mac := hmac.New(sha256.New, c.config.BatchSigningKey)
	mac.Write(raw)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return nil, fmt.Errorf("%w: signature does not verify", keeltype.ErrBatchToken)
	}
	var p tokenPayload
	if err := json.Unmarshal(raw, &p); err != nil || p.V != 1 {
		return nil, fmt.Errorf("%w: unreadable payload", keeltype.ErrBatchToken)
	}
	if filterHash(p.Filter) != p.Hash {
		return nil, fmt.Errorf("%w: filter does not match its hash", keeltype.ErrBatchToken)
	}
	if now := time.Now().UnixMicro(); now > p.Expires {
		return nil, fmt.Errorf("%w: expired %s ago", keeltype.ErrBatchTokenExpired,
			time.Duration(now-p.Expires)*time.Microsecond)
	}
	if op := ActorFrom(ctx); op != p.Operator {
		return nil, fmt.Errorf("%w: issued to %q, presented by %q", keeltype.ErrBatchTokenOperator, p.Operator, op)
	}
	if p.Kind != kind {
		return nil, fmt.Errorf("%w: token is for batch kind %q, not %q", keeltype.ErrBatchToken, p.Kind, kind)
	}
	return &p, nil
}

// BatchPreviewOf counts filter under src at a snapshot taken now and returns
// the counts with a token bound (HMAC-SHA256, Config.BatchSigningKey) to the
// canonical filter, the snapshot time, the operator (ActorFrom(ctx)) and
// the kind, valid for Config.BatchPreviewTTL.
func BatchPreviewOf[F any, TTx any](ctx context.Context, c *Client[TTx], src BatchSource[F], filter F) (*BatchPreview, error) {
	if len(c.config.BatchSigningKey) == 0 {
		return nil, fmt.Errorf("%w: Config.BatchSigningKey is not set", keeltype.ErrInvalidArgument)
	}
	canon, err := canonicalJSON(filter)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding filter: %v", keeltype.ErrInvalidArgument, err)
	}
	snapshot := time.Now().UTC().Truncate(time.Microsecond)
	pv, err := src.Preview(ctx, filter, snapshot)
	if err != nil {
		return nil, fmt.Errorf("previewing %s: %w", src.Kind(), err)
	}
	if pv == nil {
		pv = &BatchPreview{}
	}
	if pv.RuleSkipped == 0 && pv.Hits > pv.Eligible {
		pv.RuleSkipped = pv.Hits - pv.Eligible
	}
	pv.Kind, pv.Filter, pv.SnapshotAt, pv.Operator = src.Kind(), canon, snapshot, ActorFrom(ctx)
	pv.ExpiresAt = snapshot.Add(c.config.BatchPreviewTTL)
	pv.Token = ""
	counts, err := json.Marshal(map[string]any{"hits": pv.Hits, "eligible": pv.Eligible,
		"rule_skipped": pv.RuleSkipped, "by_state": pv.ByState, "distinct_keys": pv.DistinctKeys,
		"earliest": pv.Earliest})
	if err != nil {
		return nil, err
	}
	pv.Token, err = c.signToken(&tokenPayload{V: 1, Kind: pv.Kind, Filter: canon, Hash: filterHash(canon),
		Snapshot: snapshot, Operator: pv.Operator, Expires: pv.ExpiresAt.UnixMicro(), Preview: counts})
	if err != nil {
		return nil, err
	}
	return pv, nil
}

// BatchCreate creates a batch from a preview token and materializes its
// items from the token's filter and snapshot time. The token must verify,
// be unexpired, belong to ActorFrom(ctx) and be for src's kind; otherwise
// the error wraps keeltype.ErrBatchToken, ErrBatchTokenExpired or
// ErrBatchTokenOperator and nothing is created. The batch row and its
// audit entry commit together; items then go in chunks (the batch stays
// queued meanwhile) and the batch starts once all are in. If
// materialization fails midway, BatchMaterialize resumes it.
func BatchCreate[F any, TTx any](ctx context.Context, c *Client[TTx], src BatchSource[F], token string, opts BatchOpts) (*keeltype.BatchRow, error) {
	p, err := c.verifyToken(ctx, token, src.Kind())
	if err != nil {
		return nil, err
	}
	reason := strings.TrimSpace(opts.Reason)
	if utf8.RuneCountInString(reason) < MinBatchReasonRunes {
		return nil, fmt.Errorf("%w: a batch needs a reason of at least %d characters", keeltype.ErrInvalidArgument, MinBatchReasonRunes)
	}
	var filter F
	if err := json.Unmarshal(p.Filter, &filter); err != nil {
		return nil, fmt.Errorf("%w: decoding the token's filter: %v", keeltype.ErrBatchToken, err)
	}
	rate, autopause := opts.Rate, opts.AutoPauseFailures
	if rate == 0 {
		rate = DefaultBatchRate
	}
	if autopause == 0 {
		autopause = DefaultBatchAutoPause
	}
	rate, autopause = max(rate, 0), max(autopause, 0)
	queue := opts.Queue
	if queue == "" {
		queue = DefaultQueue
	}
	if !validName(queue) {
		return nil, fmt.Errorf("%w: queue %q", keeltype.ErrInvalidArgument, queue)
	}
	var batch *keeltype.BatchRow
	a := Audit{Action: "batch.create", Reason: reason, Context: map[string]any{
		"kind": p.Kind, "name": opts.Name, "filter": p.Filter, "filter_hash": p.Hash,
		"snapshot_at": p.Snapshot, "preview": p.Preview, "queue": queue, "rate_per_key": rate,
		"autopause_failures": autopause, "pause_on_key_pause": opts.PauseOnKeyPause,
	}}
	err = c.inAuditedTxTarget(ctx, a, func(ex keeldriver.Executor) (string, error) {
		var err error
		batch, err = ex.BatchInsert(ctx, &keeldriver.BatchInsertParams{Kind: p.Kind, Name: opts.Name, Reason: reason,
			Filter: p.Filter, FilterHash: p.Hash, SnapshotAt: p.Snapshot, CreatedBy: ActorFrom(ctx), Queue: queue,
			Rate: rate, AutoPauseFailures: autopause, PauseOnKeyPause: opts.PauseOnKeyPause, Preview: p.Preview})
		if err != nil {
			return "", err
		}
		limit := &keeltype.FlowLimit{Pattern: BatchKeyPrefix(batch.ID) + "*", Rate: rate,
			AutoPauseFailures: autopause, Weight: 1, UpdatedBy: ActorFrom(ctx)}
		// Installed even when it limits nothing: a batch key without a
		// known limit makes claimers reload theirs (batchLimitsFresh).
		if _, err := flowExec(ex).FlowLimitUpsert(ctx, limit); err != nil {
			return "", err
		}
		return batchTarget(batch.ID), nil
	})
	if err != nil {
		return nil, err
	}
	c.flowChanged(ctx, "limits")
	return c.materialize(ctx, batch, opts.ChunkSize, func(emit func(subject, flowKey string, args JobArgs) error) error {
		return src.Subjects(ctx, filter, p.Snapshot, emit)
	})
}

// BatchTokenVerify checks a preview token as BatchCreate does (signature,
// expiry, operator, kind) without creating anything, with the same errors:
// a module that makes a token single-use checks it before claiming it.
func BatchTokenVerify[TTx any](ctx context.Context, c *Client[TTx], kind, token string) error {
	_, err := c.verifyToken(ctx, token, kind)
	return err
}

// BatchMaterialize (re)inserts the items of batch id from its stored filter
// and snapshot time; subjects already present are skipped, so it resumes a
// materialization that a crash interrupted.
func BatchMaterialize[F any, TTx any](ctx context.Context, c *Client[TTx], src BatchSource[F], id int64) (*keeltype.BatchRow, error) {
	b, err := c.BatchGet(ctx, id)
	if err != nil {
		return nil, err
	}
	if b.Kind != src.Kind() {
		return nil, fmt.Errorf("%w: batch %d is of kind %q, not %q", keeltype.ErrInvalidArgument, id, b.Kind, src.Kind())
	}
	var filter F
	if err := json.Unmarshal(b.Filter, &filter); err != nil {
		return nil, fmt.Errorf("decoding the filter of batch %d: %w", id, err)
	}
	return c.materialize(ctx, b, 0, func(emit func(subject, flowKey string, args JobArgs) error) error {
		return src.Subjects(ctx, filter, b.SnapshotAt, emit)
	})
}

func batchTarget(id int64) string { return "batch:" + strconv.FormatInt(id, 10) }

// inAuditedTxTarget is inAuditedTx for actions whose target is known only
// inside the transaction (a new batch's id).
func (c *Client[TTx]) inAuditedTxTarget(ctx context.Context, a Audit, action func(exec keeldriver.Executor) (string, error)) error {
	if err := a.check(); err != nil {
		return err
	}
	tx, err := c.driver.Executor().Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning %s: %w", a.Action, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if a.Target, err = action(tx); err != nil {
		return err
	}
	if _, err := tx.AuditInsert(ctx, auditRow(ctx, a)); err != nil {
		return fmt.Errorf("auditing %s: %w", a.Action, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing %s: %w", a.Action, err)
	}
	return nil
}

// materialize streams subjects into items, chunk by chunk, each chunk in its
// own transaction that first locks the batch row: a chunk never lands in a
// batch terminated meanwhile, and no lock on the subjects' table is held by
// Keel at all.
func (c *Client[TTx]) materialize(ctx context.Context, b *keeltype.BatchRow, chunk int, run func(emit func(subject, flowKey string, args JobArgs) error) error) (*keeltype.BatchRow, error) {
	if chunk <= 0 {
		chunk = DefaultBatchChunk
	}
	prefix := BatchKeyPrefix(b.ID)
	params := newItemChunk(b, chunk, c.config.MaxAttempts)
	flush := func() error {
		if len(params.Subjects) == 0 {
			return nil
		}
		if err := c.insertChunk(ctx, params); err != nil {
			return err
		}
		params = newItemChunk(b, chunk, c.config.MaxAttempts)
		return nil
	}
	err := run(func(subject, flowKey string, args JobArgs) error {
		if subject == "" || len(subject) > 512 {
			return fmt.Errorf("%w: subject must be 1..512 bytes", keeltype.ErrInvalidArgument)
		}
		key := prefix + flowKey
		if len(key) > 256 {
			return fmt.Errorf("%w: flow key %q too long", keeltype.ErrInvalidArgument, flowKey)
		}
		if args == nil || !validName(args.Kind()) {
			return fmt.Errorf("%w: item %q has no valid job args", keeltype.ErrInvalidArgument, subject)
		}
		raw, err := json.Marshal(args)
		if err != nil {
			return fmt.Errorf("%w: encoding args of %q: %v", keeltype.ErrInvalidArgument, subject, err)
		}
		params.Kinds = append(params.Kinds, args.Kind())
		params.Subjects = append(params.Subjects, subject)
		params.FlowKeys = append(params.FlowKeys, key)
		params.Args = append(params.Args, raw)
		if len(params.Subjects) >= chunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		if errors.Is(err, keeltype.ErrBatchTerminated) {
			return c.BatchGet(ctx, b.ID)
		}
		_ = c.driver.Executor().BatchSetLastError(ctx, b.ID, "materialization: "+err.Error())
		return nil, fmt.Errorf("materializing batch %d: %w", b.ID, err)
	}
	if err := c.driver.Executor().BatchSetMaterialized(ctx, b.ID); err != nil {
		return nil, err
	}
	if err := c.BatchTick(ctx); err != nil {
		c.logger.Warn("starting batch", "batch", b.ID, "error", err)
	}
	return c.BatchGet(ctx, b.ID)
}

func newItemChunk(b *keeltype.BatchRow, chunk, maxAttempts int) *keeldriver.BatchItemsInsertParams {
	return &keeldriver.BatchItemsInsertParams{BatchID: b.ID, Queue: b.Queue, Priority: DefaultPriority,
		MaxAttempts: maxAttempts, Kinds: make([]string, 0, chunk), Subjects: make([]string, 0, chunk),
		FlowKeys: make([]string, 0, chunk), Args: make([]json.RawMessage, 0, chunk)}
}

func (c *Client[TTx]) insertChunk(ctx context.Context, p *keeldriver.BatchItemsInsertParams) error {
	tx, err := c.driver.Executor().Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	st, err := tx.BatchLockForItems(ctx, p.BatchID)
	if err != nil {
		return err
	}
	if st.Final() {
		return fmt.Errorf("%w: batch %d is %s", keeltype.ErrBatchTerminated, p.BatchID, st)
	}
	if _, err := tx.BatchItemsInsert(ctx, p); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
