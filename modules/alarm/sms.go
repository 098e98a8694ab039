package alarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/keelwork/keel/module"
)

// Notice channels.
const (
	ChannelWebhook = "webhook"
	ChannelSMS     = "sms"
)

// SMSChannel reports whether severe notices also go to the on-call phones
// by SMS, and when not, why (Chinese and English, for the console): the
// channel needs a module offering an SMS sender (the delivery module, the
// SMS platform, where it is installed) and alarm.sms_to with
// alarm.sms_account.
func (m *Module[TTx]) SMSChannel() (bool, [2]string) {
	sender, _ := m.services.SMS()
	switch {
	case sender == nil:
		return false, [2]string{"未提供：本服务没有安装短信平台（投递模块）", "not offered: no SMS platform (the delivery module) is installed on this server"}
	case len(m.set.SMSTo) == 0:
		return false, [2]string{"未启用：没有配置值班手机号（alarm.sms_to）", "off: no on-call phones are set (alarm.sms_to)"}
	}
	_, by := m.services.SMS()
	return true, [2]string{fmt.Sprintf("已启用：经 %s 模块发送到 %d 个值班手机号", by, len(m.set.SMSTo)),
		fmt.Sprintf("on: through the %s module to %d on-call phones", by, len(m.set.SMSTo))}
}

// sendSMS hands a notice to the SMS platform: success is the platform's
// durable acceptance (it forwards to the carrier itself); the notice's
// key makes a retried hand-over send once.
func (m *Module[TTx]) sendSMS(ctx context.Context, n *Notice) error {
	sender, _ := m.services.SMS()
	if sender == nil {
		return errors.New("SMS: no module offers an SMS sender any more")
	}
	var body NoticeBody
	if err := json.Unmarshal([]byte(n.Body), &body); err != nil {
		return fmt.Errorf("SMS: reading notice %d: %w", n.ID, err)
	}
	_, err := sender.SendSMS(ctx, module.SMS{Key: "alarm:" + n.Key, Account: m.set.SMSAccount, Phones: m.set.SMSTo, Text: smsText(n, &body)})
	if err != nil {
		return fmt.Errorf("SMS: %w", err)
	}
	return nil
}

// smsText is the message: what happened, to which device, by which rule,
// the peak and when (UTC, said so), in Chinese (one SMS holds 70).
func smsText(n *Notice, b *NoticeBody) string {
	var s strings.Builder
	fmt.Fprintf(&s, "【告警】%s", NoticeKindZH(n.Kind))
	for _, f := range b.Members {
		fmt.Fprintf(&s, " %s %s %s 峰值%s 共%d次 %s UTC", SeverityZH(f.PeakSeverity), f.Device, f.Rule, trimNum(f.PeakValue), f.Count,
			f.FirstAt.UTC().Format("01-02 15:04:05"))
	}
	return s.String()
}

func trimNum(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
