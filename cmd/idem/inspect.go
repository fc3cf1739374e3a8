package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem"
)

const inspectSynopsis = `inspect [-db idem.db | postgres://… | mysql://…] <scope> <key>

<key> is the key as the client sent it in Idempotency-Key: bare (abc) or
quoted ("abc"); quote it for the shell too ('"abc"'). The transfers
service's scopes are "anonymous" and "bearer:<digest>", where <digest> is
the first 32 hex digits of the bearer token's SHA-256, and
"inbox/transfers" for the messages of serve -consume (key: the message id,
or sha256:<hex of the id> when the id is not a valid key), and "import" for
the rows of idem import (key: <length of the batch id>/<batch id>/<row id>,
or sha256/<hex> when that is not a valid key; see docs/BATCHES.md); a scope the
records table shows as idem:sha256:… (a long or binary one) may be given
either way. inspect never changes the database.`

type inspectCommand struct {
	*Main
}

// inspectOptions is idem inspect's command line.
type inspectOptions struct {
	commandLine
	db string

	// Set by validate.
	scope, key string
}

func (o *inspectOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "SQLite file path, a postgres:// URL or a mysql:// URL")
}

func (o *inspectOptions) validate() error {
	if len(o.args) != 2 {
		return usageError{`inspect: want two arguments, <scope> and <key> (the transfers service's scopes are "anonymous" and "bearer:<digest of the token>")`}
	}
	o.scope = o.args[0]
	var err error
	if o.key, err = parseKeyArg(o.args[1]); err != nil {
		return usageError{fmt.Sprintf("inspect: %v", err)}
	}
	return needSQL("inspect", o.db, "inspect reads the records of the SQL database")
}

// Run parses args, validates them and runs idem inspect.
func (c *inspectCommand) Run(ctx context.Context, args []string) error {
	o := new(inspectOptions)
	if err := c.parseOptions("inspect", inspectSynopsis, flagsFirst, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *inspectCommand) run(ctx context.Context, o *inspectOptions) error {
	scope, key := o.scope, o.key
	b, err := openBackend(ctx, o.db, backendOptions{existing: true, readOnly: true})
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	defer b.close()
	in, ok := b.store.(idem.Inspector)
	if !ok {
		return errors.New("inspect: this store cannot look records up")
	}
	// The Guard stores a long or binary scope as its digest: look the
	// scope up as the Guard stored it, then as given, for a digest copied
	// from the records table.
	rec, err := in.Lookup(ctx, &idem.LookupParams{Scope: idem.StoredScope(scope), Key: key})
	if errors.Is(err, idem.ErrNotFound) && idem.StoredScope(scope) != scope {
		rec, err = in.Lookup(ctx, &idem.LookupParams{Scope: scope, Key: key})
	}
	if errors.Is(err, idem.ErrNotFound) {
		return fmt.Errorf("inspect: no record for scope %q and key %q", scope, key)
	}
	if err != nil {
		return err
	}
	state := string(rec.State)
	if rec.Expired(time.Now()) {
		state += " (expired: behaves as new)"
	}
	w := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "scope\t%s\n", rec.Scope)
	fmt.Fprintf(w, "key\t%s\n", rec.Key)
	fmt.Fprintf(w, "state\t%s\n", state)
	fmt.Fprintf(w, "fingerprint\t%s\n", rec.Fingerprint)
	fmt.Fprintf(w, "created\t%s\n", rec.CreatedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "expires\t%s\n", rec.ExpiresAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "status\t%d\n", rec.Result.Status)
	fmt.Fprintf(w, "headers\t%d\n", len(rec.Result.Header))
	fmt.Fprintf(w, "body\t%d bytes\n", len(rec.Result.Body))
	return w.Flush()
}

// parseKeyArg reads a key given on the command line as a client sends it
// in Idempotency-Key: an RFC 8941 sf-string ("abc") or a bare token. A key
// that is neither, but is a valid key as it stands (one the client quoted
// because it holds a comma, say), is taken as it is.
func parseKeyArg(arg string) (string, error) {
	key, err := idem.ParseKey(arg)
	if err == nil {
		return key, nil
	}
	if !strings.HasPrefix(arg, `"`) && idem.ValidateKey(arg) == nil {
		return arg, nil
	}
	return "", err
}
