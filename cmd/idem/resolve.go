package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

const resolveSynopsis = `resolve [-db idem.db | postgres://… | mysql://… | redis://…] <scope> <key> (--answer STATUS BODYFILE | --abandon) --reason TEXT [--actor NAME]

After a human reconciled a pending intent (a payout whose lease ended and
whose provider state had to be checked by hand), resolve records the final
answer that its retries get: --answer the HTTP status and the body in
BODYFILE (- for standard input; application/json when it is JSON), or
--abandon, a 410 problem saying an operator gave it up. Completers stop
trying it. It is fenced: a record under a live lease, or claimed again
since it was read, is never overwritten. The record as it was, who, when
and why are written to the audit log in the same transaction.`

type resolveCommand struct {
	*Main
}

// resolveOptions is idem resolve's command line.
type resolveOptions struct {
	commandLine
	db, reason, actor string
	answer            int
	abandon           bool
	ttl               time.Duration

	// Set by validate.
	scope, key, bodyFile string
}

func (o *resolveOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "SQLite file path, postgres:// URL, mysql:// URL, or redis:// server")
	fs.IntVar(&o.answer, "answer", 0, "the HTTP status of the answer; the argument after it is the file of its body")
	fs.BoolVar(&o.abandon, "abandon", false, "give the intent up: retries get a 410 problem")
	fs.StringVar(&o.reason, "reason", "", "why (required; written to the audit log)")
	fs.StringVar(&o.actor, "actor", "", "who, for the audit log (default: the OS user)")
	fs.DurationVar(&o.ttl, "ttl", idem.DefaultTTL, "how long the answer is kept, for a record claimed without a TTL of its own")
}

func (o *resolveOptions) validate() error {
	switch {
	case o.given["answer"] && o.abandon:
		return usageError{"resolve: give one of --answer STATUS BODYFILE and --abandon, not both"}
	case !o.given["answer"] && !o.abandon:
		return usageError{"resolve: give --answer STATUS BODYFILE (the answer retries get) or --abandon"}
	case o.given["answer"] && (o.answer < 200 || o.answer > 599):
		return usageError{fmt.Sprintf("resolve: --answer's status must be an HTTP status from 200 to 599, got %d", o.answer)}
	case o.given["answer"] && len(o.args) != 3:
		return usageError{"resolve: want <scope> <key> and, after --answer STATUS, the body's file (- for standard input)"}
	case o.abandon && len(o.args) != 2:
		return usageError{"resolve: want two arguments, <scope> and <key>"}
	case strings.TrimSpace(o.reason) == "":
		return usageError{"resolve: --reason is required: say why, for the audit log"}
	case o.ttl <= 0:
		return usageError{fmt.Sprintf("resolve: -ttl must be positive, got %s", o.ttl)}
	}
	o.scope = o.args[0]
	var err error
	if o.key, err = parseKeyArg(o.args[1]); err != nil {
		return usageError{fmt.Sprintf("resolve: %v", err)}
	}
	if len(o.args) == 3 {
		o.bodyFile = o.args[2]
	}
	return nil
}

// Run parses args, validates them and runs idem resolve.
func (c *resolveCommand) Run(ctx context.Context, args []string) error {
	o := new(resolveOptions)
	if err := c.parseOptions("resolve", resolveSynopsis, flagsAnywhere, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *resolveCommand) run(ctx context.Context, o *resolveOptions) error {
	ch := change{scope: o.scope, key: o.key, actor: actorName(o.actor), reason: o.reason, abandon: o.abandon, defaultTTL: o.ttl}
	if !o.abandon {
		body, err := readBody(o.bodyFile)
		if err != nil {
			return usageError{fmt.Sprintf("resolve: %v", err)}
		}
		res := answerResult(o.answer, body)
		ch.answer = &res
	}
	s, err := openAdmin(ctx, "resolve", o.db, false)
	if err != nil {
		return err
	}
	defer s.close()
	rec, res, err := resolve(ctx, s, ch, time.Now())
	if err != nil {
		return fmt.Errorf("resolve: %w", refusalHint(err))
	}
	verb := "resolved"
	if o.abandon {
		verb = "abandoned"
	}
	fmt.Fprintf(c.Stdout, "%s %s %s (pending, %d attempt(s), last error %q): its retries now get %d\n",
		verb, rec.Scope, rec.Key, rec.Attempts, rec.LastError, res.Status)
	return nil
}

// readBody reads the body file of resolve --answer; "-" is standard input.
func readBody(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	}
	return os.ReadFile(name)
}
