package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/keelwork/keel/internal/cli"
)

// inventoryVerb runs an inventory verb through --server.
func inventoryVerb(cmd *cobra.Command, f func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error) error {
	url, schema := dbFlags(cmd)
	server, _ := cmd.Flags().GetString("server")
	asJSON, _ := cmd.Flags().GetBool("json")
	o := &cli.AdminOpts{Server: server, Token: cli.TokenFromEnv(), DatabaseURL: url, Schema: schema, JSON: asJSON,
		Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()}
	return cli.WithRemoteAPI(cmd.Context(), o, "inventory", func(ctx context.Context, c *cli.APIClient) error { return f(ctx, c, o) })
}

func inventoryCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "inventory", Short: "Stock, reservations, conflicts and admission of the inventory module (through --server)"}
	var wh, after string
	var limit int
	stock := &cobra.Command{Use: "stock", Short: "Balances by warehouse and SKU (the shown value is not a promise)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return inventoryVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.InventoryStock(ctx, c, o, wh, limit, after)
			})
		}}
	stock.Flags().StringVar(&wh, "warehouse", "", "only this warehouse")
	stock.Flags().IntVar(&limit, "limit", 50, "page size (1..1000)")
	stock.Flags().StringVar(&after, "after", "", "continue after a previous page")
	res := &cobra.Command{Use: "reservation ID", Short: "A reservation with its history and ledger rows", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return inventoryVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.InventoryReservation(ctx, c, o, args[0])
			})
		}}
	var state string
	conflicts := &cobra.Command{Use: "conflicts", Short: "Conflict tickets (冲突核验)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return inventoryVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.InventoryConflicts(ctx, c, o, state)
			})
		}}
	conflicts.Flags().StringVar(&state, "state", "", "open, awaiting_approval or resolved")
	var busy string
	adm := &cobra.Command{Use: "admission", Short: "The admission watermark; --busy on|off switches it by hand (audited)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return inventoryVerb(cmd, func(ctx context.Context, c *cli.APIClient, o *cli.AdminOpts) error {
				return cli.InventoryAdmission(ctx, c, o, busy)
			})
		}}
	adm.Flags().StringVar(&busy, "busy", "", "on or off")
	cmd.AddCommand(stock, res, conflicts, adm)
	return cmd
}
