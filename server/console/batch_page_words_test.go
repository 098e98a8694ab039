package console

import (
	"testing"
	"time"
)

// TestSubjectAndDurationWords: a zero-padded numeric subject is shown as
// its business id, other subjects as they are; a duration is words in the
// operator's language, not Go's 6m29s.
func TestSubjectAndDurationWords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"000000000123": "123", "000000000000": "0", "tag-s001": "tag-s001", "0x12": "0x12"} {
		if got := subjectWord(in); got != want {
			t.Errorf("subjectWord(%q) = %q, want %q", in, got, want)
		}
	}
	d := 6*time.Minute + 29*time.Second
	if got := durationWords(langZH, d); got != "6 分 29 秒" {
		t.Errorf("zh: %q", got)
	}
	if got := durationWords(langEN, d); got != "6 min 29 s" {
		t.Errorf("en: %q", got)
	}
	if got := durationWords(langZH, 2*time.Hour+5*time.Second); got != "2 小时 0 分 5 秒" {
		t.Errorf("zh hours: %q", got)
	}
}
