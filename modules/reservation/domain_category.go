package reservation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"unicode/utf8"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keelsql"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
)

// CategorySettings are a category's editable settings.
type CategorySettings struct {
	NameZH          string `json:"name_zh"`
	NameEN          string `json:"name_en"`
	GraceMinutes    int    `json:"grace_minutes"`
	Bands           []Band `json:"bands"`
	ReminderMinutes int    `json:"reminder_minutes"`
	AppealMinutes   int    `json:"appeal_minutes"`
	HoldMinutes     int    `json:"hold_minutes"`
	ReleaseMode     Mode   `json:"release_mode"`
}

var categoryID = regexp.MustCompile(`^[a-z0-9_-]{1,40}$`)

// Validate says which field is wrong.
func (s *CategorySettings) Validate() error {
	switch {
	case s.NameZH == "" || utf8.RuneCountInString(s.NameZH) > 100:
		return module.Invalid("name_zh: 1..100 characters")
	case s.NameEN == "" || utf8.RuneCountInString(s.NameEN) > 100:
		return module.Invalid("name_en: 1..100 characters")
	case s.GraceMinutes < 0 || s.GraceMinutes > 1440:
		return module.Invalid("grace_minutes: 0..1440")
	case s.ReminderMinutes < 0 || s.ReminderMinutes > 1440:
		return module.Invalid("reminder_minutes: 0..1440 (0: no reminder)")
	case s.AppealMinutes < 0 || s.AppealMinutes > 10080:
		return module.Invalid("appeal_minutes: 0..10080 (0: no appeal)")
	case s.HoldMinutes < 1 || s.HoldMinutes > 1440:
		return module.Invalid("hold_minutes: 1..1440")
	}
	if _, ok := ParseMode(string(s.ReleaseMode)); !ok {
		return module.Invalid("release_mode: one of off, dry_run, on")
	}
	if err := ValidateBands(s.Bands); err != nil {
		return module.Invalid("bands: %v", err)
	}
	return nil
}

func (m *Module[TTx]) categories(ctx context.Context, q keelsql.Querier) ([]*Category, error) {
	list, err := m.st.categories(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("reading categories: %w", err)
	}
	return list, nil
}

// Categories lists the categories.
func (m *Module[TTx]) Categories(ctx context.Context) ([]*Category, error) {
	return m.categories(ctx, m.st.db)
}

// Category returns one category.
func (m *Module[TTx]) Category(ctx context.Context, id string) (*Category, error) {
	c, err := m.st.category(ctx, m.st.db, id)
	if err != nil {
		return nil, fmt.Errorf("reading category %s: %w", id, err)
	}
	return c, nil
}

// CreateCategory adds a category, audited.
func (m *Module[TTx]) CreateCategory(ctx context.Context, id string, s CategorySettings, reason string) (*Category, error) {
	if !categoryID.MatchString(id) {
		return nil, module.Invalid("id: 1..40 of a-z, 0-9, _ and -")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	client, err := m.engine()
	if err != nil {
		return nil, err
	}
	now, actor := m.now(), keel.ActorFrom(ctx)
	err = m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		added, err := m.st.insertCategory(ctx, tx, id, s, now, actor)
		if err != nil {
			return err
		}
		if !added {
			return errCategoryExists
		}
		return client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.category_create",
			Target: "category:" + id, Reason: reason, Context: map[string]any{"settings": s}})
	})
	if err != nil {
		return nil, wrapf(err, "creating category %s", id)
	}
	return m.Category(ctx, id)
}

// UpdateCategory replaces a category's settings at the given version, at
// run time: release points already computed keep their grace; the release
// mode (the gray switch) applies from the next claim. Audited, and a mode
// change is audited as its own action.
func (m *Module[TTx]) UpdateCategory(ctx context.Context, id string, version int64, s CategorySettings, reason string) (*Category, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	client, err := m.engine()
	if err != nil {
		return nil, err
	}
	now, actor := m.now(), keel.ActorFrom(ctx)
	err = m.st.db.InTx(ctx, func(tx keelsql.Tx[TTx]) error {
		old, err := m.st.category(ctx, tx, id)
		if err != nil {
			return err
		}
		updated, err := m.st.updateCategory(ctx, tx, id, version, s, now, actor)
		if err != nil {
			return err
		}
		if !updated {
			return module.Errorf(http.StatusConflict, "version_conflict", "category %s is at version %d, not %d", id, old.Version, version)
		}
		return m.auditCategory(ctx, client, tx, old, s, reason)
	})
	if err != nil {
		if errors.Is(err, keeltype.ErrNotFound) {
			return nil, err
		}
		return nil, wrapf(err, "updating category %s", id)
	}
	return m.Category(ctx, id)
}

func (m *Module[TTx]) auditCategory(ctx context.Context, client *keel.Client[TTx], tx keelsql.Tx[TTx], old *Category, s CategorySettings, reason string) error {
	err := client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.category_update",
		Target: "category:" + old.ID, Reason: reason, Context: map[string]any{"settings": s, "from_version": old.Version}})
	if err != nil || old.ReleaseMode == s.ReleaseMode {
		return err
	}
	return client.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: "reservation.release_mode",
		Target: "category:" + old.ID, Reason: reason,
		Context: map[string]any{"from": old.ReleaseMode, "to": s.ReleaseMode}})
}
