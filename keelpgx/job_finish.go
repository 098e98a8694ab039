package keelpgx

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/keelwork/keel/keeldriver"
	"github.com/keelwork/keel/keeltype"
)

// finishColumns are the parallel arrays JobFinishMany unnests.
type finishColumns struct {
	id, fence                []int64
	state                    []string
	runAt, waitDeadline, now []pgtype.Timestamptz
	result, errEntry         []pgtype.Text
	waitReason               []string
	attemptDelta             []int32
	needsCheck               []bool
}

// errorEntry is an AttemptError as stored. Zero attempt, fence and time are
// left out so the statement fills them from the row and the clock.
type errorEntry struct {
	Attempt int                 `json:"attempt,omitempty"`
	Fence   int64               `json:"fence,omitempty"`
	Class   keeltype.ErrorClass `json:"class"`
	Message string              `json:"message"`
	At      *time.Time          `json:"at,omitempty"`
}

func encodeError(e *keeltype.AttemptError) (pgtype.Text, error) {
	if e == nil {
		return pgtype.Text{}, nil
	}
	entry := errorEntry{Attempt: e.Attempt, Fence: e.Fence, Class: e.Class, Message: e.Message}
	if !e.At.IsZero() {
		at := e.At.UTC()
		entry.At = &at
	}
	b, err := json.Marshal(entry)
	if err != nil {
		return pgtype.Text{}, err
	}
	return pgtype.Text{String: string(b), Valid: true}, nil
}

func newFinishColumns(params []*keeldriver.JobFinishParams) (finishColumns, error) {
	var c finishColumns
	for _, p := range params {
		if !p.State.Valid() || p.State == keeltype.JobStateRunning {
			return c, fmt.Errorf("job %d: target state %q: %w", p.ID, p.State, keeltype.ErrInvalidArgument)
		}
		errEntry, err := encodeError(p.Error)
		if err != nil {
			return c, fmt.Errorf("job %d: encoding error: %w", p.ID, err)
		}
		c.id = append(c.id, p.ID)
		c.fence = append(c.fence, p.Fence)
		c.state = append(c.state, string(p.State))
		c.runAt = append(c.runAt, nullTime(p.RunAt))
		c.result = append(c.result, pgtype.Text{String: string(p.Result), Valid: len(p.Result) > 0})
		c.errEntry = append(c.errEntry, errEntry)
		c.waitReason = append(c.waitReason, p.WaitReason)
		c.waitDeadline = append(c.waitDeadline, nullTime(p.WaitDeadline))
		c.attemptDelta = append(c.attemptDelta, int32(p.AttemptDelta))
		c.needsCheck = append(c.needsCheck, p.NeedsCheck)
		c.now = append(c.now, nullTime(p.Now))
	}
	return c, nil
}

// JobFinishMany applies every fenced transition in one statement, then
// explains the ones that did not apply with the job's current state and
// fence. Results follow input order.
func (e *executor) JobFinishMany(ctx context.Context, params []*keeldriver.JobFinishParams) ([]keeldriver.JobFinishResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	c, err := newFinishColumns(params)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: finishing jobs: %w", err)
	}
	rows, err := e.claim.Query(ctx, sqlJobFinishMany, c.id, c.fence, c.state, c.runAt, c.result, c.errEntry,
		c.waitReason, c.waitDeadline, c.attemptDelta, c.needsCheck, c.now)
	if err != nil {
		return nil, fmt.Errorf("keelpgx: finishing jobs: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("keelpgx: finishing jobs: %w", err)
	}
	results := make([]keeldriver.JobFinishResult, len(params))
	for i, p := range params {
		results[i].ID = p.ID
	}
	for _, ord := range applied {
		results[ord-1].Applied = true
	}
	if err := e.explainStale(ctx, results); err != nil {
		return nil, fmt.Errorf("keelpgx: finishing jobs: %w", err)
	}
	return results, nil
}

// explainStale fills CurrentState/CurrentFence of results not applied; a
// job that no longer exists keeps "" and 0.
func (e *executor) explainStale(ctx context.Context, results []keeldriver.JobFinishResult) error {
	var ids []int64
	for _, r := range results {
		if !r.Applied {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := e.db.Query(ctx, sqlJobCurrentFences, ids)
	if err != nil {
		return err
	}
	type current struct {
		state string
		fence int64
	}
	now := map[int64]current{}
	var id, fence int64
	var state string
	_, err = pgx.ForEachRow(rows, []any{&id, &state, &fence}, func() error {
		now[id] = current{state, fence}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range results {
		if cur, ok := now[results[i].ID]; ok && !results[i].Applied {
			results[i].CurrentState = keeltype.JobState(cur.state)
			results[i].CurrentFence = cur.fence
		}
	}
	return nil
}
