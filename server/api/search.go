package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/keelwork/keel/module"
)

// MaxSearchLen bounds a search query: every id an operator types is far
// shorter.
const MaxSearchLen = 200

// searchTimeout bounds each lookup, so that one slow module does not hold
// the answer of the others.
const searchTimeout = 3 * time.Second

// SearchHit is one thing found by id. Kind is a stable code ("job",
// "batch", "flow_key", or the module's own); Module is "" for the engine's;
// Path opens it in the console.
type SearchHit struct {
	Module string `json:"module,omitempty"`
	Kind   string `json:"kind,omitempty"`
	KindZH string `json:"kind_zh"`
	KindEN string `json:"kind_en"`
	Title  string `json:"title"`
	// TitleEN is Title in English.
	TitleEN string `json:"title_en,omitempty"`
	// State is an engine hit's state code (a job's or a batch's), which
	// the console says in words.
	State string `json:"state,omitempty"`
	Path  string `json:"path"`
}

// SearchResult is the answer of a search: the hits of every lookup, and
// the modules whose lookup failed (the answer is then partial).
type SearchResult struct {
	Query       string       `json:"query"`
	Hits        []*SearchHit `json:"hits"`
	Unavailable []string     `json:"unavailable,omitempty"`
}

// Searcher is a module's lookup by id, under the module's name.
type Searcher struct {
	Module string
	module.Searcher
}

// Searchers are the lookups of the modules that implement module.Searcher.
func Searchers(mods []module.Web) []Searcher {
	var out []Searcher
	for _, m := range mods {
		if s, ok := m.(module.Searcher); ok {
			out = append(out, Searcher{Module: m.Name(), Searcher: s})
		}
	}
	return out
}

// Search finds q (trimmed; 1..MaxSearchLen bytes, else invalid_argument)
// as a job or batch id and a flow key of the engine, and through every
// module's lookup. A lookup that fails is logged and named in
// Unavailable: the operator still gets what the others found.
func Search(ctx context.Context, e Engine, searchers []Searcher, logger *slog.Logger, raw string) (*SearchResult, error) {
	q := strings.TrimSpace(raw)
	if q == "" {
		return nil, Errorf(CodeInvalidArgument, "q: type an id to search for")
	}
	if len(q) > MaxSearchLen {
		return nil, Errorf(CodeInvalidArgument, "q: longer than %d bytes", MaxSearchLen)
	}
	if logger == nil {
		logger = slog.Default()
	}
	res := &SearchResult{Query: q, Hits: []*SearchHit{}}
	engineLookups(ctx, e, q, res)
	for _, s := range searchers {
		sctx, cancel := context.WithTimeout(ctx, searchTimeout)
		hits, err := s.Search(sctx, q)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			logger.Warn("search lookup failed", "module", s.Module, "error", err)
			res.Unavailable = append(res.Unavailable, s.Module)
			continue
		}
		for _, h := range hits {
			res.Hits = append(res.Hits, &SearchHit{Module: s.Module, Kind: h.Kind, KindZH: h.KindZH, KindEN: h.KindEN,
				Title: h.Title, TitleEN: h.TitleEN, Path: h.Path})
		}
	}
	return res, nil
}

// engineLookups adds the engine's own: a number is a job or batch id; any
// text may be a flow key. Not found is no hit; another failure makes the
// engine's part unavailable.
func engineLookups(ctx context.Context, e Engine, q string, res *SearchResult) {
	failed := false
	miss := func(err error) bool {
		if err == nil {
			return false
		}
		if FromError(err).Code != CodeNotFound {
			failed = true
		}
		return true
	}
	if id, err := strconv.ParseInt(q, 10, 64); err == nil && id > 0 {
		if j, err := e.JobGet(ctx, id); !miss(err) {
			res.Hits = append(res.Hits, &SearchHit{Kind: "job", KindZH: "任务", KindEN: "job",
				Title: "#" + q + " · " + j.Kind, State: string(j.State), Path: "/jobs/" + q})
		}
		if b, err := e.BatchGet(ctx, id); !miss(err) {
			res.Hits = append(res.Hits, &SearchHit{Kind: "batch", KindZH: "批量任务", KindEN: "batch",
				Title: "#" + q + " · " + b.Name, State: string(b.State), Path: "/batches/" + q})
		}
	}
	if len(q) <= 256 {
		if k, err := e.FlowKeyGet(ctx, q); !miss(err) {
			res.Hits = append(res.Hits, &SearchHit{Kind: "flow_key", KindZH: "流控键", KindEN: "flow key",
				Title: k.Key, Path: "/keys/" + url.PathEscape(k.Key)})
		}
	}
	if failed {
		res.Unavailable = append(res.Unavailable, "engine")
	}
}

func (h *Handler) search(_ http.ResponseWriter, r *http.Request) (int, any, error) {
	q := newQuery(r, "q")
	if q.Err != nil {
		return 0, nil, q.Err
	}
	res, err := Search(r.Context(), h.engine, h.searchers, h.logger, r.URL.Query().Get("q"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}
