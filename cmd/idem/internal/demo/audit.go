package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/jackc/pgx/v5"
)

func put(ctx context.Context, addr, id string, balance int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+addr+"/accounts/"+id, bytes.NewReader(fmt.Appendf(nil, `{"balance":%d}`, balance)))
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT /accounts/%s: %s", id, res.Status)
	}
	return nil
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// audit reads the ledger straight from the server (not through the faulty
// network) and compares it with the intents. It also returns how many
// transfers each intent made.
func audit(ctx context.Context, addr string, intents []planned) (Report, []int, error) {
	var list transfers.TransferList
	if err := getJSON(ctx, "http://"+addr+"/transfers", &list); err != nil {
		return Report{}, nil, err
	}
	perAmount := make(map[int64]int, len(list.Transfers))
	for _, t := range list.Transfers {
		perAmount[t.Amount]++
	}
	r := Report{Intents: len(intents), Applied: list.Count}
	want := make(map[string]int64, numAccounts)
	for i := range numAccounts {
		want[accountID(i)] = initialBalance
	}
	applied := make([]int, len(intents))
	for i, p := range intents {
		applied[i] = perAmount[p.amount]
		switch n := perAmount[p.amount]; {
		case n == 0:
			r.Lost++
		case n > 1:
			r.Duplicated += n - 1
		}
		want[p.from] -= p.amount
		want[p.to] += p.amount
	}
	var total int64
	r.Correct = true
	for i := range numAccounts {
		var a transfers.Account
		if err := getJSON(ctx, "http://"+addr+"/accounts/"+accountID(i), &a); err != nil {
			return Report{}, nil, err
		}
		total += a.Balance
		if a.Balance != want[a.ID] {
			r.Correct = false
		}
	}
	r.Conserved = total == initialBalance*numAccounts
	return r, applied, nil
}

// freshSchema creates a schema for one mode in the PostgreSQL database at
// dsn and returns a URL whose connections work in it, and a function that
// drops the schema.
func freshSchema(ctx context.Context, dsn string, m Mode) (string, func(), error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	var schema string
	if err := conn.QueryRow(ctx, `SELECT 'idem_demo_' || replace($1, '-', '_') || '_' || floor(extract(epoch from clock_timestamp()) * 1000)::bigint`, string(m)).Scan(&schema); err != nil {
		return "", nil, err
	}
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		return "", nil, err
	}
	drop := func() {
		c, err := pgx.Connect(context.WithoutCancel(ctx), dsn)
		if err != nil {
			return
		}
		defer c.Close(context.WithoutCancel(ctx))
		_, _ = c.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+ident+" CASCADE")
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + schema, drop, nil
}
