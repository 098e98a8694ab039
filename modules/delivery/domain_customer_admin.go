package delivery

import (
	"context"
	"fmt"

	"github.com/keelwork/keel"
	"github.com/keelwork/keel/keeltype"
	"github.com/keelwork/keel/module"
	"github.com/keelwork/keel/module/web"
)

// CreateEnterprise adds a customer enterprise, audited in the same
// transaction.
func (m *Module[TTx]) CreateEnterprise(ctx context.Context, name string) (int64, error) {
	name, err := web.Name("enterprise name", name, 200)
	if err != nil {
		return 0, err
	}
	var id int64
	err = m.st.db.InTx(ctx, func(tx txOf[TTx]) error {
		var err error
		if id, err = m.st.insertEnterprise(ctx, tx, name); err != nil {
			return err
		}
		return m.auditTarget(ctx, tx, "delivery.enterprise_create", "enterprise:"+itoa(id), map[string]any{"name": name})
	})
	return id, err
}

// CreateApplication adds an application, installs its rate limit and
// makes it claimable here.
func (m *Module[TTx]) CreateApplication(ctx context.Context, n NewApplication) (*Application, error) {
	if err := n.validate(); err != nil {
		return nil, module.Invalid("%v", err)
	}
	var id int64
	err := m.st.db.InTx(ctx, func(tx txOf[TTx]) error {
		var err error
		if id, err = m.st.insertApp(ctx, tx, &n); err != nil {
			return err
		}
		rate := n.Rate
		if rate == 0 {
			rate = DefaultAppRate
		}
		if err := m.setAppLimitTx(ctx, tx, id, rate); err != nil {
			return err
		}
		return m.audit(ctx, tx, "delivery.app_create", id, map[string]any{"name": n.Name, "account": n.Account,
			"protocol": n.Protocol, "enterprise_id": n.EnterpriseID, "rate": n.Rate})
	})
	if err != nil {
		return nil, err
	}
	return m.afterAppChange(ctx, id)
}

// AppChange is what an operator may change on an application; nil fields
// stay as they are.
type AppChange struct {
	Enabled       *bool    `json:"enabled,omitempty"`
	ReportEnabled *bool    `json:"report_enabled,omitempty"`
	MOEnabled     *bool    `json:"mo_enabled,omitempty"`
	ReportCompat  *bool    `json:"report_compat,omitempty"`
	PushURL       *string  `json:"push_url,omitempty"`
	Rate          *float64 `json:"rate,omitempty"`
}

// UpdateApplication applies c to the application as of the version read
// (a concurrent change is refused, not overwritten).
func (m *Module[TTx]) UpdateApplication(ctx context.Context, id int64, c AppChange) (*Application, error) {
	if err := m.refreshApps(ctx); err != nil {
		return nil, err
	}
	cur, ok := m.apps.get(id)
	if !ok {
		return nil, module.Errorf(404, "application_not_found", "no application %d", id)
	}
	a := *cur
	if c.Enabled != nil {
		a.Status = map[bool]string{true: AppEnabled, false: AppDisabled}[*c.Enabled]
	}
	setIf(&a.ReportEnabled, c.ReportEnabled)
	setIf(&a.MOEnabled, c.MOEnabled)
	setIf(&a.ReportCompat, c.ReportCompat)
	setIf(&a.PushURL, c.PushURL)
	setIf(&a.Rate, c.Rate)
	// Checked before the write: a refused change is never stored.
	if err := checkAppChange(&c); err != nil {
		return nil, err
	}
	if a.Rate <= 0 {
		return nil, module.Invalid("rate must be positive")
	}
	err := m.st.db.InTx(ctx, func(tx txOf[TTx]) error {
		if _, err := m.st.updateApp(ctx, tx, &a); err != nil {
			return err
		}
		if err := m.setAppLimitTx(ctx, tx, id, a.Rate); err != nil {
			return err
		}
		return m.audit(ctx, tx, "delivery.app_update", id, map[string]any{"status": a.Status, "report_enabled": a.ReportEnabled,
			"mo_enabled": a.MOEnabled, "report_compat": a.ReportCompat, "push_url": a.PushURL, "rate": a.Rate})
	})
	if isNoRows(err) {
		return nil, module.Errorf(409, "application_changed", "application %d changed meanwhile; read it again", id)
	}
	if err != nil {
		return nil, err
	}
	return m.afterAppChange(ctx, id)
}

// audit records a configuration change in its transaction (no engine
// client yet, as in tests that build data before starting: not audited).
func (m *Module[TTx]) audit(ctx context.Context, tx txOf[TTx], action string, appID int64, c map[string]any) error {
	return m.auditTarget(ctx, tx, action, "application:"+itoa(appID), c)
}

func (m *Module[TTx]) auditTarget(ctx context.Context, tx txOf[TTx], action, target string, c map[string]any) error {
	cl := m.client.Load()
	if cl == nil {
		return nil
	}
	return cl.AuditRecordTx(ctx, tx.Native(), keel.Audit{Action: action, Target: target, Context: c})
}

// setAppLimitTx sets the application's key limit in the transaction of
// the change that implies it: one audited change, committed or refused as
// a whole (before Start there is no client yet; Start installs every
// application's limit).
func (m *Module[TTx]) setAppLimitTx(ctx context.Context, tx txOf[TTx], id int64, rate float64) error {
	cl := m.client.Load()
	if cl == nil {
		return nil
	}
	_, err := cl.FlowLimitSetTx(ctx, tx.Native(), &keeltype.FlowLimit{Pattern: appKey(id), Queue: QueueName, Rate: rate})
	return err
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func (m *Module[TTx]) afterAppChange(ctx context.Context, id int64) (*Application, error) {
	if err := m.refreshApps(ctx); err != nil {
		return nil, err
	}
	a, ok := m.apps.get(id)
	if !ok {
		return nil, fmt.Errorf("application %d vanished", id)
	}
	m.recomputeKeys()
	return a, nil
}
