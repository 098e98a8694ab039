package web

import "testing"

func init() {
	RegisterFields("fieldtest", map[string][2]string{
		"rows": {"账单行", "Bill line"}, "fee_minor": {"手续费", "Fee"}, "state": {"状态", "State"},
	})
	RegisterFieldValues("fieldtest", "state", map[string][2]string{"refunded": {"已退款", "refunded"}})
}

// TestFieldWords: a flattened evidence path reads segment by segment in
// the scope's words with array positions counted from one; a segment
// without words keeps its name beside the ones with words; a path with
// none, or another module's scope, reads as stored. A coded value reads
// by its field's last segment.
func TestFieldWords(t *testing.T) {
	for _, c := range []struct{ lang, scope, path, want string }{
		{"zh", "fieldtest", "rows[0].fee_minor", "账单行 1 · 手续费"},
		{"en", "fieldtest", "rows[11].fee_minor", "Bill line 12 · Fee"},
		{"zh", "fieldtest", "rows[2].other", "账单行 3 · other"},
		{"zh", "fieldtest", "something_else", "something_else"},
		{"zh", "othermodule", "fee_minor", "fee_minor"},
		{"zh", "fieldtest", "", ""},
	} {
		if got := FieldWord(c.lang, c.scope, c.path); got != c.want {
			t.Errorf("FieldWord(%s, %s, %q) = %q, want %q", c.lang, c.scope, c.path, got, c.want)
		}
	}
	for _, c := range []struct{ lang, path, value, want string }{
		{"zh", "rows[0].state", "refunded", "已退款"},
		{"zh", "state", "refunded", "已退款"},
		{"zh", "state", "paid", "paid"},
		{"zh", "fee_minor", "refunded", "refunded"},
		{"zh", "rows[0].found", "true", "是"},
		{"en", "found", "false", "no"},
	} {
		if got := FieldValueWord(c.lang, "fieldtest", c.path, c.value); got != c.want {
			t.Errorf("FieldValueWord(%s, %q, %q) = %q, want %q", c.lang, c.path, c.value, got, c.want)
		}
	}
}
