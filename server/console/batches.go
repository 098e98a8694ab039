package console

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/server/api"
)

type batchesData struct {
	States  []keeltype.BatchState
	State   string
	Batches []*api.Batch
	Next    string
	First   string
}

var allBatchStates = []keeltype.BatchState{keeltype.BatchQueued, keeltype.BatchRunning, keeltype.BatchPaused,
	keeltype.BatchCompleted, keeltype.BatchPartialCompleted, keeltype.BatchTerminated}

func (c *Console) batches(w http.ResponseWriter, r *http.Request, v *view) error {
	q := r.URL.Query()
	d := &batchesData{States: allBatchStates, State: q.Get("state")}
	p := &keel.BatchListParams{Limit: pageSize + 1}
	if d.State != "" {
		if !api.ValidBatchState(keeltype.BatchState(d.State)) {
			return badInput("unknown state %q", d.State)
		}
		p.States = []keeltype.BatchState{keeltype.BatchState(d.State)}
	}
	if b := q.Get("before"); b != "" {
		id, err := strconv.ParseInt(b, 10, 64)
		if err != nil || id < 1 {
			return badInput("bad page position")
		}
		p.BeforeID = id
	}
	rows, err := c.cfg.Engine.BatchList(r.Context(), p)
	if err != nil {
		return err
	}
	now := time.Now()
	for i, row := range rows {
		if i == pageSize {
			d.Next = "/batches?" + url.Values{"state": {d.State}, "before": {strconv.FormatInt(rows[i-1].ID, 10)}}.Encode()
			break
		}
		d.Batches = append(d.Batches, api.BatchView(row, now))
	}
	if p.BeforeID != 0 {
		d.First = "/batches?" + url.Values{"state": {d.State}}.Encode()
	}
	return c.render(w, v, "batches", d)
}

type batchData struct {
	Batch    *api.Batch
	Outcome  string
	Subject  string
	Text     string
	Items    []*api.BatchItem
	Next     string
	First    string
	ETA      string
	Unsettle int64 // items not yet in a final bucket
}

func (c *Console) batch(w http.ResponseWriter, r *http.Request, v *view) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	d := &batchData{Outcome: q.Get("outcome"), Subject: q.Get("subject"), Text: q.Get("text")}
	if d.Outcome != "" && !api.ValidBatchOutcome(keeltype.BatchOutcome(d.Outcome)) {
		return badInput("unknown outcome %q", d.Outcome)
	}
	after := q.Get("after")
	if len(d.Subject) > 512 || len(d.Text) > 200 || len(after) > 512 {
		return badInput("filters are too long")
	}
	if d.Batch, err = api.BatchDetail(r.Context(), c.cfg.Engine, id); err != nil {
		return err
	}
	if d.Batch.Progress.ETASeconds > 0 {
		d.ETA = durationWords(v.Lang, time.Duration(d.Batch.Progress.ETASeconds)*time.Second)
	}
	d.Unsettle = d.Batch.Progress.Total - d.Batch.Progress.Done
	rows, err := c.cfg.Engine.BatchItems(r.Context(), &keel.BatchItemsParams{BatchID: id, AfterSubject: after,
		Outcome: keeltype.BatchOutcome(d.Outcome), Subject: d.Subject, Text: d.Text, Limit: pageSize + 1})
	if err != nil {
		return err
	}
	base := url.Values{"outcome": {d.Outcome}, "subject": {d.Subject}, "text": {d.Text}}
	for i, row := range rows {
		if i == pageSize {
			nq := url.Values{}
			for k, vs := range base {
				nq[k] = vs
			}
			nq.Set("after", rows[i-1].Subject)
			d.Next = "/batches/" + strconv.FormatInt(id, 10) + "?" + nq.Encode()
			break
		}
		d.Items = append(d.Items, api.BatchItemView(row))
	}
	if after != "" {
		d.First = "/batches/" + strconv.FormatInt(id, 10) + "?" + base.Encode()
	}
	return c.render(w, v, "batch", d)
}

// batchReason: batch actions need a reason by the one reason rule
// (web.Reason, required).
func batchReason(r *http.Request, lang string) (string, error) {
	reason, err := web.Reason(r.PostFormValue("reason"), true)
	if err != nil {
		return "", badInput("%s", word(lang, "reason_required"))
	}
	return reason, nil
}

func (c *Console) batchAction(w http.ResponseWriter, r *http.Request, v *view) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	reason, err := batchReason(r, v.Lang)
	if err != nil {
		return err
	}
	e, ctx := c.cfg.Engine, r.Context()
	switch r.PathValue("action") {
	case "pause":
		_, err = e.BatchPause(ctx, id, reason)
	case "resume":
		_, err = e.BatchResume(ctx, id, reason)
	case "terminate":
		_, err = e.BatchTerminate(ctx, id, reason)
	default:
		return api.Errorf(api.CodeNotFound, "no such action")
	}
	if err != nil {
		return err
	}
	c.back(w, r, word(v.Lang, "done"), "")
	return nil
}

func (c *Console) batchKeyResume(w http.ResponseWriter, r *http.Request, v *view) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	key := r.PathValue("key")
	if key == "" || len(key) > 200 {
		return badInput("key must be 1..200 bytes")
	}
	reason, err := batchReason(r, v.Lang)
	if err != nil {
		return err
	}
	if _, err := c.cfg.Engine.BatchKeyResume(r.Context(), id, key, reason); err != nil {
		return err
	}
	c.back(w, r, word(v.Lang, "done"), "")
	return nil
}
