package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/keelwork/keel/module/web"
)

// TestDateInputFollowsTheLanguage: the console's date field is a text
// input (never the browser's type=date, drawn in the browser's language)
// whose placeholder and hint are the page's language, and it escapes what
// it is given.
func TestDateInputFollowsTheLanguage(t *testing.T) {
	for _, c := range []struct {
		got  string
		want []string
	}{
		{string(web.DateInput("zh", "day", "2026-07-14")), []string{`type="text"`, `name="day"`, `value="2026-07-14"`, `data-date="date"`, `placeholder="年-月-日"`, `maxlength="10"`, "格式：年-月-日"}},
		{string(web.DateInput("en", "day", "")), []string{`value=""`, `placeholder="yyyy-mm-dd"`, "Format: yyyy-mm-dd"}},
		{string(web.DateTimeInput("zh", "from", "2026-07-14 09:30")), []string{`data-date="datetime"`, `placeholder="年-月-日 时:分"`, `maxlength="16"`}},
		{string(web.DateTimeInput("en", "from", "")), []string{`placeholder="yyyy-mm-dd hh:mm"`}},
		{string(web.DateInput("zh", "d", `"><script>`)), []string{`value="&#34;&gt;&lt;script&gt;"`}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.got, w) {
				t.Errorf("%s lacks %s", c.got, w)
			}
		}
		if strings.Contains(c.got, `type="date`) {
			t.Errorf("a browser date input: %s", c.got)
		}
	}
}

// TestTimeHeadNamesTheZone: a time column's head names the zone its
// values are shown in, in the page's language.
func TestTimeHeadNamesTheZone(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no zone database:", err)
	}
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	for _, c := range []struct {
		lang string
		loc  *time.Location
		want string
	}{
		{"zh", nil, "创建时间（北京时间）"},
		{"en", nil, "Created (UTC+8)"},
		{"zh", web.DisplayZone, "创建时间（北京时间）"},
		{"zh", shanghai, "创建时间（北京时间）"},
		{"en", time.UTC, "Created (UTC)"},
		{"zh", tokyo, "创建时间（Asia/Tokyo UTC+9）"},
		{"en", time.FixedZone("", -(3*3600 + 1800)), "Created (UTC-3:30)"},
	} {
		if got := web.TimeHead(c.lang, "创建时间", "Created", c.loc); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.lang, c.loc, got, c.want)
		}
	}
}
