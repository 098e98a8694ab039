package console

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module/web"
	"github.com/keelwork/keel/server/api"
)

const pageSize = 50

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.:\-]{1,128}$`)

func badInput(format string, args ...any) error {
	return api.Errorf(api.CodeInvalidArgument, format, args...)
}

type overviewData struct {
	Samples []sample
	Every   time.Duration
	// Cards are every module's home.
	Cards   []*homeCard
	Queues  []*api.Queue
	Tripped []*api.FlowKey
	Paused  []*api.FlowKey
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, v *view) error {
	ctx := r.Context()
	qs, err := api.Queues(ctx, c.cfg.Engine)
	if err != nil {
		return err
	}
	d := &overviewData{Samples: c.sampler.snapshot(), Every: c.sampler.every, Queues: qs, Cards: c.cards(ctx, v.Lang)}
	tripped, err := c.cfg.Engine.FlowKeyList(ctx, &keel.FlowKeyListParams{OnlyTripped: true, HideFinishedBatches: true, Limit: 20})
	if err != nil {
		return err
	}
	paused, err := c.cfg.Engine.FlowKeyList(ctx, &keel.FlowKeyListParams{OnlyPaused: true, HideFinishedBatches: true, Limit: 20})
	if err != nil {
		return err
	}
	for _, k := range tripped {
		d.Tripped = append(d.Tripped, api.FlowKeyView(k, nil))
	}
	for _, k := range paused {
		d.Paused = append(d.Paused, api.FlowKeyView(k, nil))
	}
	return c.render(w, v, "overview", d)
}

type jobsData struct {
	States  []keeltype.JobState
	State   string
	Kind    string
	Queue   string
	FlowKey string
	Jobs    []*api.Job
	Next    string
	First   string
}

func (c *Console) jobs(w http.ResponseWriter, r *http.Request, v *view) error {
	q := r.URL.Query()
	d := &jobsData{States: keeltype.AllJobStates, State: q.Get("state"), Kind: q.Get("kind"), Queue: q.Get("queue"), FlowKey: q.Get("flow_key")}
	p := &keel.JobListParams{Desc: true, Limit: pageSize + 1, FlowKey: d.FlowKey}
	if d.State != "" {
		if !keeltype.JobState(d.State).Valid() {
			return badInput("unknown state %q", d.State)
		}
		p.States = []keeltype.JobState{keeltype.JobState(d.State)}
	}
	for _, f := range []struct {
		v   string
		dst *[]string
	}{{d.Kind, &p.Kinds}, {d.Queue, &p.Queues}} {
		if f.v != "" {
			if !namePattern.MatchString(f.v) {
				return badInput("filters take names of A-Z a-z 0-9 _ . : -")
			}
			*f.dst = []string{f.v}
		}
	}
	if len(d.FlowKey) > 256 {
		return badInput("flow key longer than 256 bytes")
	}
	if b := q.Get("before"); b != "" {
		id, err := strconv.ParseInt(b, 10, 64)
		if err != nil || id < 1 {
			return badInput("bad page position")
		}
		p.BeforeID = id
	}
	rows, err := c.cfg.Engine.JobList(r.Context(), p)
	if err != nil {
		return err
	}
	for i, row := range rows {
		if i == pageSize {
			nq := url.Values{}
			for k, vs := range q {
				nq[k] = vs
			}
			nq.Set("before", strconv.FormatInt(rows[i-1].ID, 10))
			nq.Del("flash")
			nq.Del("err")
			d.Next = "/jobs?" + nq.Encode()
			break
		}
		d.Jobs = append(d.Jobs, api.JobView(row))
	}
	if p.BeforeID != 0 {
		fq := url.Values{}
		for k, vs := range q {
			fq[k] = vs
		}
		fq.Del("before")
		d.First = "/jobs?" + fq.Encode()
	}
	return c.render(w, v, "jobs", d)
}

func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, badInput("id must be a positive integer")
	}
	return id, nil
}

func (c *Console) job(w http.ResponseWriter, r *http.Request, v *view) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	row, err := c.cfg.Engine.JobGet(r.Context(), id)
	if err != nil {
		return err
	}
	return c.render(w, v, "job", api.JobView(row))
}

// formReason reads an optional reason by the one reason rule
// (web.Reason): the same as the API's and the CLI's.
func formReason(r *http.Request) (string, error) {
	return web.Reason(r.PostFormValue("reason"), false)
}

func (c *Console) jobAction(w http.ResponseWriter, r *http.Request, v *view) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	reason, err := formReason(r)
	if err != nil {
		return err
	}
	e, ctx := c.cfg.Engine, r.Context()
	switch r.PathValue("action") {
	case "cancel":
		_, err = e.JobCancel(ctx, id, reason)
	case "retry":
		_, err = e.JobRetry(ctx, id, reason)
	case "delete":
		if _, err = e.JobDelete(ctx, id, reason); err == nil {
			http.Redirect(w, r, "/jobs?flash="+url.QueryEscape(word(v.Lang, "done")), http.StatusSeeOther)
			return nil
		}
	default:
		return api.Errorf(api.CodeNotFound, "no such action")
	}
	if err != nil {
		return err
	}
	c.back(w, r, word(v.Lang, "done"), "")
	return nil
}

func (c *Console) queues(w http.ResponseWriter, r *http.Request, v *view) error {
	qs, err := api.Queues(r.Context(), c.cfg.Engine)
	if err != nil {
		return err
	}
	return c.render(w, v, "queues", qs)
}

func (c *Console) queueAction(w http.ResponseWriter, r *http.Request, v *view) error {
	name := r.PathValue("name")
	if !namePattern.MatchString(name) {
		return badInput("bad queue name")
	}
	reason, err := formReason(r)
	if err != nil {
		return err
	}
	switch r.PathValue("action") {
	case "pause":
		_, err = c.cfg.Engine.QueuePause(r.Context(), name, reason)
	case "resume":
		_, err = c.cfg.Engine.QueueResume(r.Context(), name, reason)
	default:
		return api.Errorf(api.CodeNotFound, "no such action")
	}
	if err != nil {
		return err
	}
	c.back(w, r, word(v.Lang, "done"), "")
	return nil
}

type keysData struct {
	Keys    []*api.FlowKey
	Limits  []*api.FlowLimit
	Prefix  string
	Paused  bool
	Tripped bool
	// Finished also lists the keys of finished batches.
	Finished bool
	Next     string
}

func (c *Console) keys(w http.ResponseWriter, r *http.Request, v *view) error {
	q := r.URL.Query()
	d := &keysData{Prefix: q.Get("prefix"), Paused: q.Get("paused") == "1", Tripped: q.Get("tripped") == "1",
		Finished: q.Get("finished") == "1"}
	if len(d.Prefix) > 256 || len(q.Get("after")) > 256 {
		return badInput("prefix longer than 256 bytes")
	}
	rows, err := c.cfg.Engine.FlowKeyList(r.Context(), &keel.FlowKeyListParams{Prefix: d.Prefix, After: q.Get("after"),
		OnlyPaused: d.Paused, OnlyTripped: d.Tripped, HideFinishedBatches: !d.Finished, Limit: pageSize + 1})
	if err != nil {
		return err
	}
	for i, k := range rows {
		if i == pageSize {
			nq := url.Values{"prefix": {d.Prefix}, "after": {rows[i-1].Key}}
			if d.Paused {
				nq.Set("paused", "1")
			}
			if d.Tripped {
				nq.Set("tripped", "1")
			}
			if d.Finished {
				nq.Set("finished", "1")
			}
			d.Next = "/keys?" + nq.Encode()
			break
		}
		d.Keys = append(d.Keys, api.FlowKeyView(k, nil))
	}
	limits, err := c.cfg.Engine.FlowLimits(r.Context())
	if err != nil {
		return err
	}
	for _, l := range limits {
		d.Limits = append(d.Limits, api.FlowLimitView(l))
	}
	return c.render(w, v, "keys", d)
}

func (c *Console) key(w http.ResponseWriter, r *http.Request, v *view) error {
	key := r.PathValue("key")
	if key == "" || len(key) > 256 {
		return badInput("flow key must be 1..256 bytes")
	}
	row, err := c.cfg.Engine.FlowKeyGet(r.Context(), key)
	if err != nil {
		return err
	}
	stats, err := c.cfg.Engine.FlowKeyStats(r.Context(), []string{key})
	if err != nil {
		return err
	}
	var st *keeltype.FlowKeyStats
	if len(stats) > 0 {
		st = stats[0]
	}
	return c.render(w, v, "key", api.FlowKeyView(row, st))
}

func (c *Console) keyAction(w http.ResponseWriter, r *http.Request, v *view) error {
	key := r.PathValue("key")
	if key == "" || len(key) > 256 {
		return badInput("flow key must be 1..256 bytes")
	}
	reason, err := formReason(r)
	if err != nil {
		return err
	}
	e, ctx := c.cfg.Engine, r.Context()
	switch r.PathValue("action") {
	case "pause":
		_, err = e.FlowKeyPause(ctx, key, reason)
	case "resume":
		_, err = e.FlowKeyResume(ctx, key, reason)
	case "close-breaker":
		_, err = e.FlowKeyCloseBreaker(ctx, key, reason)
	default:
		return api.Errorf(api.CodeNotFound, "no such action")
	}
	if err != nil {
		return err
	}
	c.back(w, r, word(v.Lang, "done"), "")
	return nil
}

func formFloat(r *http.Request, name string) (float64, error) {
	s := strings.TrimSpace(r.PostFormValue(name))
	if s == "" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, badInput("%s must be a number", name)
	}
	return f, nil
}

func (c *Console) limitSet(w http.ResponseWriter, r *http.Request, v *view) error {
	rate, err := formFloat(r, "rate")
	if err != nil {
		return err
	}
	maxRunning, err := formFloat(r, "max_running")
	if err != nil || maxRunning != float64(int(maxRunning)) {
		return badInput("max_running must be a whole number")
	}
	reason, err := formReason(r)
	if err != nil {
		return err
	}
	l := &keeltype.FlowLimit{Pattern: strings.TrimSpace(r.PostFormValue("pattern")), Queue: strings.TrimSpace(r.PostFormValue("queue")),
		Rate: rate, MaxRunning: int(maxRunning)}
	if _, err := c.cfg.Engine.FlowLimitSet(r.Context(), l, reason); err != nil {
		return err
	}
	c.back(w, r, word(v.Lang, "done"), "")
	return nil
}

func (c *Console) limitDelete(w http.ResponseWriter, r *http.Request, v *view) error {
	reason, err := formReason(r)
	if err != nil {
		return err
	}
	if err := c.cfg.Engine.FlowLimitDelete(r.Context(), r.PostFormValue("pattern"), r.PostFormValue("queue"), reason); err != nil {
		return err
	}
	c.back(w, r, word(v.Lang, "done"), "")
	return nil
}

type auditData struct {
	Rows   []*api.Audit
	Actor  string
	Action string
	Target string
	Next   string
}

func (c *Console) audit(w http.ResponseWriter, r *http.Request, v *view) error {
	q := r.URL.Query()
	d := &auditData{Actor: q.Get("actor"), Action: q.Get("action"), Target: q.Get("target")}
	if len(d.Actor) > 200 || len(d.Action) > 200 || len(d.Target) > 300 {
		return badInput("filters are too long")
	}
	p := &keel.AuditListParams{Actor: d.Actor, Action: d.Action, Target: d.Target, Limit: pageSize + 1}
	if b := q.Get("before"); b != "" {
		id, err := strconv.ParseInt(b, 10, 64)
		if err != nil || id < 1 {
			return badInput("bad page position")
		}
		p.BeforeID = id
	}
	rows, err := c.cfg.Engine.AuditList(r.Context(), p)
	if err != nil {
		return err
	}
	for i, a := range rows {
		if i == pageSize {
			nq := url.Values{"actor": {d.Actor}, "action": {d.Action}, "target": {d.Target},
				"before": {strconv.FormatInt(rows[i-1].ID, 10)}}
			d.Next = "/audit?" + nq.Encode()
			break
		}
		d.Rows = append(d.Rows, &api.Audit{ID: a.ID, At: a.At, Actor: a.Actor, Action: a.Action, Target: a.Target,
			Reason: a.Reason, Context: a.Context})
	}
	return c.render(w, v, "audit", d)
}
