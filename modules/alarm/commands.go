package alarm

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/module/modcli"
)

// The module's verbs under `keel alarm`: they act through a running
// server's API and print the module's own English words.

const apiPrefix = "/api/v1/alarm"

func commands(run modcli.Runner) []*cobra.Command {
	return []*cobra.Command{modcli.Group("alarm",
		"IoT alarms: list and acknowledge alarm instances, notices, silences and the storm panel (through --server)",
		instancesCmd(run), ackCmd(run), silenceCmd(run), stormCmd(run), replayCmd(run))}
}

func verb(run modcli.Runner, work func(ctx context.Context, e *modcli.Env, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return run(cmd, func(ctx context.Context, e *modcli.Env) error { return work(ctx, e, args) })
	}
}

func instancesCmd(run modcli.Runner) *cobra.Command {
	var state, device string
	c := &cobra.Command{Use: "instances", Short: "List alarm instances (open ones first, by severity)", Args: cobra.NoArgs}
	c.Flags().StringVar(&state, "state", "", "firing, acked, nodata or recovered")
	c.Flags().StringVar(&device, "device", "", "only this device")
	c.RunE = verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
		if state != "" && StateZH(state) == "未知状态" {
			return fmt.Errorf("--state %q is not one of firing, acked, nodata, recovered", state)
		}
		q := url.Values{}
		if state != "" {
			q.Set("state", state)
		}
		if device != "" {
			q.Set("device", device)
		}
		var out struct {
			Instances []Instance `json:"instances"`
		}
		path := apiPrefix + "/instances"
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		raw, err := e.API.Call(ctx, "GET", path, nil, &out)
		if err != nil || e.Printed(raw) {
			return err
		}
		var rows [][]string
		for _, i := range out.Instances {
			rows = append(rows, []string{i.ID, i.Device, fmt.Sprintf("%s v%d", i.Rule, i.RuleVersion), SeverityEN(i.Severity), StateEN(i.State),
				strconv.FormatInt(i.Count, 10), modcli.TS(i.FirstAt), modcli.TS(i.LastAt)})
		}
		modcli.Table(e.Out, "INSTANCE\tDEVICE\tRULE\tSEVERITY\tSTATE\tCOUNT\tFIRST\tLAST", rows)
		return nil
	})
	return c
}

func ackCmd(run modcli.Runner) *cobra.Command {
	var comment string
	c := &cobra.Command{Use: "ack INSTANCE", Short: "Acknowledge a firing alarm instance (audited)", Args: cobra.ExactArgs(1)}
	c.Flags().StringVar(&comment, "comment", "", "what you are doing about it")
	c.RunE = verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
		if !idPattern.MatchString(args[0]) {
			return fmt.Errorf("%q is not an alarm instance id", args[0])
		}
		var i Instance
		raw, err := e.API.Call(ctx, "POST", apiPrefix+"/instances/"+args[0]+"/ack", map[string]string{"comment": comment}, &i)
		if err != nil {
			if modcli.ProblemCode(err) == "not_found" {
				return fmt.Errorf("no alarm instance %s", args[0])
			}
			return err
		}
		if e.Printed(raw) {
			return nil
		}
		fmt.Fprintf(e.Out, "%s is %s (by %s)\n", i.ID, StateEN(i.State), i.AckedBy)
		return nil
	})
	return c
}

func silenceCmd(run modcli.Runner) *cobra.Command {
	var device, rule, comment string
	var dur time.Duration
	c := &cobra.Command{Use: "silence", Short: "Mute the notices of a device and/or rule for a while (states still change)", Args: cobra.NoArgs}
	c.Flags().StringVar(&device, "device", "", "device id")
	c.Flags().StringVar(&rule, "rule", "", "rule id")
	c.Flags().StringVar(&comment, "comment", "", "why (required)")
	c.Flags().DurationVar(&dur, "for", time.Hour, "how long (at most 720h)")
	c.RunE = verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
		if device == "" && rule == "" {
			return fmt.Errorf("name a --device, a --rule or both")
		}
		if len(strings.TrimSpace(comment)) < 4 {
			return fmt.Errorf("--comment is required (at least 4 characters)")
		}
		if dur <= 0 || dur > 720*time.Hour {
			return fmt.Errorf("--for must be above 0 and at most 720h")
		}
		now := time.Now().UTC()
		var out struct {
			ID int64 `json:"id"`
		}
		raw, err := e.API.Call(ctx, "POST", apiPrefix+"/silences", map[string]any{"device": device, "rule": rule, "starts_at": now,
			"ends_at": now.Add(dur), "comment": comment}, &out)
		if err != nil || e.Printed(raw) {
			return err
		}
		fmt.Fprintf(e.Out, "silence %d until %s\n", out.ID, modcli.TS(now.Add(dur)))
		return nil
	})
	return c
}

func stormCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "storm", Short: "The storm panel: backpressure level, backlog, severe latency, storms and replays", Args: cobra.NoArgs,
		RunE: verb(run, func(ctx context.Context, e *modcli.Env, _ []string) error {
			var p StormPanelData
			raw, err := e.API.Call(ctx, "GET", apiPrefix+"/storm", nil, &p)
			if err != nil || e.Printed(raw) {
				return err
			}
			modcli.Fields(e.Out, [][]string{{"level", strconv.Itoa(p.Pressure.Level)}, {"ordinary backlog", fmt.Sprintf("%d samples", p.Pressure.Backlog)},
				{"severe p99", fmt.Sprintf("%d ms", p.Pressure.SevereP99)}, {"compression", fmt.Sprintf("%.1f : 1", p.Compression)}})
			var rows [][]string
			for _, s := range p.Storms {
				rows = append(rows, []string{strconv.FormatInt(s.ID, 10), s.State, modcli.TS(s.StartedAt), modcli.OptTS(s.EndedAt), strconv.FormatInt(s.PeakBacklog, 10)})
			}
			modcli.Table(e.Out, "STORM\tSTATE\tSTARTED\tENDED\tPEAK BACKLOG", rows)
			return nil
		})}
}

func replayCmd(run modcli.Runner) *cobra.Command {
	return &cobra.Command{Use: "replay STORM", Short: "Merge a storm's held notices into summaries and replay them on the staircase (audited)",
		Args: cobra.ExactArgs(1), RunE: verb(run, func(ctx context.Context, e *modcli.Env, args []string) error {
			if err := modcli.PositiveID("storm", args[0]); err != nil {
				return err
			}
			raw, err := e.API.Call(ctx, "POST", apiPrefix+"/storms/"+args[0]+"/replay", nil, nil)
			if err != nil || e.Printed(raw) {
				return err
			}
			fmt.Fprintf(e.Out, "replay of storm %s started; its steps appear in `keel alarm storm`\n", args[0])
			return nil
		})}
}
