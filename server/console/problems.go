package console

import (
	"net/http"

	"github.com/keelwork/keel/server/api"
)

// problemWords say a problem in the operator's language; the raw detail
// (a sentence from the engine, in English) stays available under it.
var problemWords = map[api.Code][2]string{
	api.CodeInvalidArgument:  {"输入有误，请检查后重试。", "The input is not valid; check it and try again."},
	api.CodeInvalidJSON:      {"请求格式有误。", "The request is malformed."},
	api.CodeUnknownField:     {"请求包含未知字段。", "The request has an unknown field."},
	api.CodeInvalidCursor:    {"翻页参数无效，请从第一页重新开始。", "The page link is not valid; start again from the first page."},
	api.CodeBodyTooLarge:     {"提交的内容过大。", "What was sent is too large."},
	api.CodeUnauthenticated:  {"请先登录。", "Please sign in."},
	api.CodeForbidden:        {"当前角色无权执行此操作。", "Your role may not do this."},
	api.CodeCSRF:             {"表单已过期或来源不可信，请刷新页面后重试。", "The form expired or came from elsewhere; reload the page and try again."},
	api.CodeNotFound:         {"找不到这个对象，它可能不存在或已被删除。", "This does not exist, or was deleted."},
	api.CodeMethodNotAllowed: {"不支持此操作。", "This action is not supported here."},
	api.CodeInvalidState:     {"当前状态不允许此操作。", "Not allowed in the current state."},
	api.CodeStaleFence:       {"该任务已被其他实例接管。", "Another instance took this job over."},
	api.CodeConflict:         {"已存在相同的记录。", "The same record already exists."},
	api.CodeUnavailable:      {"数据库暂时不可用。", "The database is unavailable."},
	api.CodeInternal:         {"系统内部错误，已记录日志。", "Internal error; it was logged."},
}

// problemView is what the error page shows: the words, the raw detail on
// demand, and the stable code.
type problemView struct {
	Words, Detail, Code string
}

func problemOf(lang string, p *api.Problem) problemView {
	w, ok := problemWords[p.Code]
	if !ok {
		// A module's own code: its detail is all there is.
		return problemView{Words: p.Detail, Code: string(p.Code)}
	}
	v := problemView{Words: pick(lang, w, true, ""), Detail: p.Detail, Code: string(p.Code)}
	if p.Code == api.CodeInternal {
		v.Detail = ""
	}
	return v
}

// showProblem renders a problem as a page in the console's layout.
func (c *Console) showProblem(w http.ResponseWriter, v *view, p *api.Problem) {
	w.WriteHeader(p.Status)
	_ = c.render(w, v, "error", problemOf(v.Lang, p))
}

// notFound is the page of a path the console does not have.
func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	v := &view{Groups: c.groups, GroupOn: engineGroup, Lang: langOf(w, r), Path: r.URL.Path}
	if pr, err := c.principal(r); err == nil {
		v.Principal, v.CSRF = pr, pr.CSRF
	}
	c.showProblem(w, v, api.FromError(api.Errorf(api.CodeNotFound, "no page %s", r.URL.Path)))
}

// refuse renders a refused form post (CSRF, cross-origin) as a page.
func (c *Console) refuse(w http.ResponseWriter, v *view, detail string) {
	c.showProblem(w, v, api.FromError(api.Errorf(api.CodeCSRF, "%s", detail)))
}

// msgSuffix keeps an invalid argument's detail after the words of a
// refused form (the operator needs to know which field): other details
// are the engine's and stay on the page's detail.
func msgSuffix(pv problemView, detail string) string {
	if pv.Code == string(api.CodeInvalidArgument) && detail != "" {
		return " (" + detail + ")"
	}
	return ""
}
